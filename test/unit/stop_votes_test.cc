// The stop request folded into the loss all-reduce: the sums of every rank's vote give every
// rank the same answer, the signal most ranks received.
#include "train/loop/stop_votes.h"

#include <doctest/doctest.h>

#include <csignal>
#include <vector>

using namespace slurm_train;

namespace {
// The all-reduce's sum of each rank's votes.
std::vector<double> summed(const std::vector<int>& signals) {
  std::vector<double> sum(kStopVoteSlots, 0.0);
  for (int s : signals) {
    std::vector<double> mine(kStopVoteSlots, 0.0);
    cast_stop_vote(s, mine.data());
    for (std::size_t i = 0; i < kStopVoteSlots; ++i) sum[i] += mine[i];
  }
  return sum;
}
}  // namespace

TEST_CASE("stop votes: no rank signalled is no stop") {
  const StopVote v = counted_stop_votes(summed({0, 0, 0}).data());
  CHECK(v.signal == 0);
  CHECK(v.ranks == 0);
}

TEST_CASE("stop votes: one rank's signal stops every rank, and says how many received it") {
  const StopVote v = counted_stop_votes(summed({0, SIGUSR2, 0, 0}).data());
  CHECK(v.signal == SIGUSR2);
  CHECK(v.ranks == 1);
}

TEST_CASE("stop votes: the signal most ranks received wins; a tie goes to the lower number") {
  StopVote v = counted_stop_votes(summed({SIGTERM, SIGUSR2, SIGTERM, 0}).data());
  CHECK(v.signal == SIGTERM);
  CHECK(v.ranks == 2);
  v = counted_stop_votes(summed({SIGTERM, SIGUSR2}).data());
  CHECK(v.signal == SIGUSR2);  // 12 < 15
  CHECK(v.ranks == 1);
}

TEST_CASE("stop votes: a number outside 1..64 casts no vote") {
  const StopVote v = counted_stop_votes(summed({-3, 65, 1000}).data());
  CHECK(v.signal == 0);
}
