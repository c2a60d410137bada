// A read that crashes in the child is reported, not suffered: the parent goes on, its own signal
// handlers untouched; a read that returns or throws lets the caller read for real.
#include "train/crash_contained.h"

#include <signal.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>

using slurm_train::crash_in_child;

namespace {
void (*handler_of(int sig))(int) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}
void ignore(int) {}
}  // namespace

TEST_CASE("crash_in_child: a read that returns or throws is not a crash") {
  CHECK_FALSE(crash_in_child([] {}).has_value());
  CHECK_FALSE(crash_in_child([] { throw std::runtime_error("a clean rejection"); }).has_value());
  CHECK_FALSE(crash_in_child([] { throw 7; }).has_value());
}

TEST_CASE("crash_in_child: a segfault or an abort in the child names the signal; this process goes on") {
  // The parent's own handler for SIGSEGV stays installed and does not run for the child's crash.
  struct sigaction mine {};
  mine.sa_handler = ignore;
  struct sigaction before {};
  REQUIRE(sigaction(SIGSEGV, &mine, &before) == 0);
  const auto segv = crash_in_child([] { raise(SIGSEGV); });
  CHECK((handler_of(SIGSEGV) == &ignore));
  sigaction(SIGSEGV, &before, nullptr);
  REQUIRE(segv.has_value());
  CHECK(*segv == "signal 11 (Segmentation fault)");

  const auto abrt = crash_in_child([] { std::abort(); });
  REQUIRE(abrt.has_value());
  CHECK(*abrt == "signal 6 (Aborted)");
}

TEST_CASE("crash_in_child: a child that exits on its own before finishing is a crash, with its status") {
  const auto exited = crash_in_child([] { std::_Exit(3); });
  REQUIRE(exited.has_value());
  CHECK(*exited == "exit status 3");
}
