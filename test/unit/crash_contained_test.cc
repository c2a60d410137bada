// A read that crashes in the child is reported, not suffered: the parent goes on, its own signal
// handlers untouched; a read that returns or throws lets the caller read for real.
#include "train/io/crash_contained.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

using slurm_train::crash_in_child;
using namespace std::chrono_literals;

namespace {
void (*handler_of(int sig))(int) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}
void ignore(int) {}
}  // namespace

TEST_CASE("crash_in_child: a read that returns or throws is not a crash") {
  CHECK_FALSE(crash_in_child([] {}, 60s).has_value());
  CHECK_FALSE(crash_in_child([] { throw std::runtime_error("a clean rejection"); }, 60s).has_value());
  CHECK_FALSE(crash_in_child([] { throw 7; }, 60s).has_value());
}

TEST_CASE("crash_in_child: a segfault or an abort in the child names the signal; this process goes on") {
  // The parent's own handler for SIGSEGV stays installed and does not run for the child's crash.
  struct sigaction mine {};
  mine.sa_handler = ignore;
  struct sigaction before {};
  REQUIRE(sigaction(SIGSEGV, &mine, &before) == 0);
  const auto segv = crash_in_child([] { raise(SIGSEGV); }, 60s);
  CHECK((handler_of(SIGSEGV) == &ignore));
  sigaction(SIGSEGV, &before, nullptr);
  REQUIRE(segv.has_value());
  CHECK(*segv == "ended in signal 11 (Segmentation fault)");

  const auto abrt = crash_in_child([] { std::abort(); }, 60s);
  REQUIRE(abrt.has_value());
  CHECK(*abrt == "ended in signal 6 (Aborted)");
}

TEST_CASE("crash_in_child: a child that exits on its own before finishing is a crash, with its status") {
  const auto exited = crash_in_child([] { std::_Exit(3); }, 60s);
  REQUIRE(exited.has_value());
  CHECK(*exited == "ended in exit status 3");
}

TEST_CASE("crash_in_child: a read that does not finish in time is stopped and named") {
  const auto start = std::chrono::steady_clock::now();
  const auto hung = crash_in_child(
      [] {
        for (;;) pause();
      },
      200ms);
  REQUIRE(hung.has_value());
  CHECK(*hung == "was stopped after 0.2 s without finishing");
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("crash_in_child: the child dies with the process that started it") {
  // A forked subreaper inherits the reader once its parent is killed (as a job's time limit
  // kills a trainer), and reports how that orphan ended: 0 when by SIGKILL, at once.
  const pid_t reaper = fork();
  REQUIRE(reaper >= 0);
  if (reaper == 0) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int pids[2];
    if (pipe(pids) != 0) _exit(10);
    const pid_t parent = fork();
    if (parent == 0) {
      crash_in_child(
          [&] {
            const pid_t me = getpid();
            if (write(pids[1], &me, sizeof me) != sizeof me) _exit(1);
            for (;;) pause();
          },
          3600s);
      _exit(11);
    }
    pid_t reader = 0;
    if (read(pids[0], &reader, sizeof reader) != sizeof reader) _exit(12);
    kill(parent, SIGKILL);
    int status = 0;
    if (waitpid(parent, &status, 0) != parent) _exit(13);
    for (int tries = 0; waitpid(reader, &status, WNOHANG) != reader; ++tries) {
      if (tries == 1000) {  // 10 s: the reader outlived its parent; stop it, and fail
        kill(reader, SIGKILL);
        waitpid(reader, &status, 0);
        _exit(14);
      }
      usleep(10'000);
    }
    _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 15);
  }
  int status = 0;
  REQUIRE(waitpid(reaper, &status, 0) == reaper);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("time_limit_to_read: the base plus the file's size at 10 MB/s") {
  char path[] = "/tmp/crash-contained-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 25'000'000) == 0);
  close(fd);
  slurm_train::set_base_time_limit_to_read(1000ms);
  CHECK(slurm_train::time_limit_to_read(path) == 3500ms);
  CHECK(slurm_train::time_limit_to_read("/nonexistent/file.h5") == 1000ms);
  slurm_train::set_base_time_limit_to_read(60s);
  CHECK(slurm_train::time_limit_to_read(path) == 62500ms);
  unlink(path);
}
