// The watchdog's verdict on a hang, and its table of ranks.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "launcher/rank_status.h"

using namespace slurm_train;

namespace {
RankStatus status(int rank, std::uint64_t step, TrainPhase phase, double idle) {
  RankStatus s;
  s.rank = rank;
  s.host = "node" + std::to_string(rank / 2 + 1);
  s.pid = 1000 + rank;
  s.state = RankState::kRunning;
  s.step = step;
  s.phase = phase;
  s.seconds_since_progress = idle;
  return s;
}
}  // namespace

TEST_CASE("the watchdog blames the stalled rank that is not waiting for the others") {
  std::vector<RankStatus> ranks = {status(0, 20, TrainPhase::kAllreduce, 31), status(1, 20, TrainPhase::kForward, 32),
                                   status(2, 20, TrainPhase::kAllreduce, 31),
                                   status(3, 20, TrainPhase::kAllreduce, 30)};
  CHECK_FALSE(judge_hang(ranks, 60).hung);
  const HangVerdict v = judge_hang(ranks, 30);
  REQUIRE(v.hung);
  CHECK(v.stuck == std::vector<int>{1});
  CHECK(v.summary.find("rank 1 (node1, pid 1001)") != std::string::npos);
  CHECK(v.summary.find("forward phase of step 20") != std::string::npos);
  CHECK(v.summary.find("rank(s) 0,2-3 wait for it") != std::string::npos);

  // A finished rank is never stuck; every stalled rank in a collective: the summary says so.
  ranks = {status(0, 20, TrainPhase::kAllreduce, 40), status(1, 20, TrainPhase::kAllreduce, 40)};
  ranks.push_back(status(2, 20, TrainPhase::kForward, 400));
  ranks[2].state = RankState::kFinished;
  const HangVerdict all_wait = judge_hang(ranks, 30);
  REQUIRE(all_wait.hung);
  CHECK(all_wait.stuck.empty());
  CHECK(all_wait.summary.find("every stalled rank (0-1) waits in a collective") != std::string::npos);

  const std::string table = format_status_table(ranks);
  CHECK(table.find("gradient all-reduce") != std::string::npos);
  CHECK(table.find("finished") != std::string::npos);
}

TEST_CASE("rank lists are sorted and their runs joined") { CHECK(format_rank_list({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8"); }
