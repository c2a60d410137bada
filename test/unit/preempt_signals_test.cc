// Preemption signals by name or number.
#include <doctest/doctest.h>

#include <csignal>
#include <vector>

#include "launcher/preempt_signals.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("preemption signals by name, with or without SIG, or by number") {
  CHECK(parse_signal_list("USR2,TERM") == std::vector<int>{SIGUSR2, SIGTERM});
  CHECK(parse_signal_list("sigusr1,10,SIGUSR1") == std::vector<int>{SIGUSR1});
  CHECK(parse_signal_list("XCPU") == std::vector<int>{SIGXCPU});
  CHECK(signal_name(SIGUSR2) == "SIGUSR2");
  check_refused<std::invalid_argument>([] { parse_signal_list("USR2,KILL"); }, "KILL cannot be caught");
  check_refused<std::invalid_argument>([] { parse_signal_list("USR3"); }, "unknown signal 'USR3'");
  check_refused<std::invalid_argument>([] { parse_signal_list(""); }, "unknown signal ''");
  check_refused<std::invalid_argument>([] { parse_signal_list("999"); }, "unknown signal '999'");
}
