#include "train/io/write_all.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>

using namespace slurm_train;

TEST_CASE("write_all: a pipe smaller than the bytes takes them all, write after write") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::fcntl(fds[1], F_SETPIPE_SZ, 4096);  // many short writes
  const std::string bytes(1 << 20, 'x');
  std::string got;
  std::thread reader([&] {
    char buf[1000];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  });
  CHECK(write_all(fds[1], bytes) == bytes.size());
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  CHECK(got == bytes);
}

TEST_CASE("write_all: a failed write returns what was written, errno saying why") {
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE(full >= 0);
  errno = 0;
  CHECK(write_all(full, "abc") == 0);
  CHECK(errno == ENOSPC);
  ::close(full);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  const auto previous = std::signal(SIGPIPE, SIG_IGN);
  errno = 0;
  CHECK(write_all(fds[1], "abc") == 0);
  CHECK(errno == EPIPE);
  std::signal(SIGPIPE, previous);
  ::close(fds[1]);
  CHECK(write_all(fds[1], "") == 0);  // nothing to write: no call at all
}
