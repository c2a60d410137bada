// How often the ranks beat, by the job's size; how much a read takes off a connection.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "launcher/watchdog_wire.h"

using namespace slurm_train;

TEST_CASE("watchdog: ranks beat every second up to 2,000 ranks and less often beyond, at most every 5 s") {
  CHECK(member_beat_seconds(2) == 1.0);
  CHECK(member_beat_seconds(2000) == 1.0);
  CHECK(member_beat_seconds(4096) == doctest::Approx(2.048));
  CHECK(member_beat_seconds(16384) == 5.0);
  // Up to 10,000 ranks rank 0 reads at most 2,000 beats a second; beyond, the interval stays at 5 s
  // (16,384 ranks: 3,277 a second), so that a hang's table is never more than 5 s old.
  for (int ranks : {2, 1024, 2000, 4096, 10000}) CHECK(ranks / member_beat_seconds(ranks) <= 2000.0 + 1e-9);
  CHECK(member_beat_seconds(65536) == 5.0);
}

TEST_CASE(
    "watchdog: a read of a connection that has not proved itself stops at one hello's bytes; the rest stays queued") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  const std::string flood(64 * 1024, 'x');
  REQUIRE(::send(fds[1], flood.data(), flood.size(), MSG_DONTWAIT) == static_cast<ssize_t>(flood.size()));
  std::string in;
  CHECK(drain(fds[0], in, kMaxUnprovenBytes));
  CHECK(in.size() == kMaxUnprovenBytes);
  CHECK(kMaxUnprovenBytes == 256 + 1024);
  // At the cap a read takes nothing, and is no end of the connection.
  CHECK(drain(fds[0], in, kMaxUnprovenBytes));
  CHECK(in.size() == kMaxUnprovenBytes);
  // Once proved: the rest, whole.
  CHECK(drain(fds[0], in));
  CHECK(in == flood);
  ::close(fds[1]);
  CHECK_FALSE(drain(fds[0], in));
  ::close(fds[0]);
}
