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
  CHECK_FALSE(judge_hang(ranks, 60, 60).hung);
  const HangVerdict v = judge_hang(ranks, 30, 30);
  REQUIRE(v.hung);
  CHECK(v.stuck == std::vector<int>{1});
  CHECK(v.summary.find("rank 1 (node1, pid 1001)") != std::string::npos);
  CHECK(v.summary.find("forward phase of step 20") != std::string::npos);
  CHECK(v.summary.find("rank(s) 0,2-3 wait for it") != std::string::npos);

  // Rank 0 finished its own backward pass after rank 1 stopped: it has waited less than the
  // timeout in its all-reduce, yet waits for rank 1; rank 2, still computing, does not.
  const std::vector<RankStatus> late = {status(0, 40, TrainPhase::kAllreduce, 3.8),
                                        status(1, 40, TrainPhase::kForward, 4.0),
                                        status(2, 40, TrainPhase::kBackward, 0.1)};
  const HangVerdict late_v = judge_hang(late, 4, 4);
  REQUIRE(late_v.hung);
  CHECK(late_v.stuck == std::vector<int>{1});
  CHECK(late_v.summary.find("step 40; rank(s) 0 wait for it") != std::string::npos);

  // The other way round: rank 1's last beat made its stop look 0.1 s fresher than rank 0's wait.
  // Not yet a hang (rank 0 waits for a rank still within the timeout); a beat later, rank 1's.
  std::vector<RankStatus> early = {status(0, 80, TrainPhase::kAllreduce, 4.0),
                                   status(1, 80, TrainPhase::kForward, 3.9)};
  CHECK_FALSE(judge_hang(early, 4, 4).hung);
  early[0].seconds_since_progress = 5.0;
  early[1].seconds_since_progress = 4.9;
  const HangVerdict early_v = judge_hang(early, 4, 4);
  REQUIRE(early_v.hung);
  CHECK(early_v.stuck == std::vector<int>{1});
  CHECK(early_v.summary.find("rank 1 (node1, pid 1001) made no progress for 5 s in the forward phase of step 80; "
                             "rank(s) 0 wait for it") != std::string::npos);

  // A finished rank is never stuck; every stalled rank in a collective: the summary says so.
  ranks = {status(0, 20, TrainPhase::kAllreduce, 40), status(1, 20, TrainPhase::kAllreduce, 40)};
  ranks.push_back(status(2, 20, TrainPhase::kForward, 400));
  ranks[2].state = RankState::kFinished;
  const HangVerdict all_wait = judge_hang(ranks, 30, 30);
  REQUIRE(all_wait.hung);
  CHECK(all_wait.stuck.empty());
  CHECK(all_wait.summary.find("every stalled rank (0-1) waits in a collective") != std::string::npos);

  const std::string table = format_status_table(ranks);
  CHECK(table.find("gradient all-reduce") != std::string::npos);
  CHECK(table.find("finished") != std::string::npos);
}

TEST_CASE("the watchdog blames a silent rank (stopped, or its node cut off) before one that says it computes") {
  // Rank 2 was stopped mid-step: its last word (the forward phase) is stale and its beats stopped;
  // rank 1, at a lower step in its backward phase, is only waiting for it in what it last said.
  std::vector<RankStatus> ranks = {status(0, 20, TrainPhase::kAllreduce, 10), status(1, 19, TrainPhase::kBackward, 10),
                                   status(2, 20, TrainPhase::kForward, 10)};
  ranks[1].seconds_since_heard = 0.5;
  ranks[2].seconds_since_heard = 9;
  const HangVerdict v = judge_hang(ranks, 5, 3);
  REQUIRE(v.hung);
  CHECK(v.stuck == std::vector<int>{2});
  CHECK(v.summary.find("rank 2 (node2, pid 1002) silent for 9 s") != std::string::npos);
  CHECK(v.summary.find("last heard in the forward phase of step 20") != std::string::npos);
  CHECK(v.summary.find("rank(s) 0-1 wait for it") != std::string::npos);

  // Silence shorter than the hang timeout, or than three beats, is not yet silence.
  ranks[2].seconds_since_heard = 4;
  CHECK(judge_hang(ranks, 5, 3).stuck == std::vector<int>{1});
  ranks[2].seconds_since_heard = 9;
  CHECK(judge_hang(ranks, 5, 15).stuck == std::vector<int>{1});
}

TEST_CASE("rank lists are sorted and their runs joined") { CHECK(format_rank_list({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8"); }
