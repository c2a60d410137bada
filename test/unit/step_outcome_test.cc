#include "launcher/step_outcome.h"
#include "launcher/step_report.h"

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "launcher/exit_codes.h"
#include "launcher/restart_env.h"

#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::TempDir;

TEST_CASE("step outcome: every cause has a name that parses back; an unknown one is an error naming it") {
  for (StepCause c :
       {StepCause::kRunning, StepCause::kDone, StepCause::kRankLost, StepCause::kRankFailed, StepCause::kHang,
        StepCause::kNeverConnected, StepCause::kDiverged, StepCause::kConfig, StepCause::kCheckpointWrite,
        StepCause::kPreempted, StepCause::kGaveUp, StepCause::kFolderBusy, StepCause::kOutOfMemory})
    CHECK(parse_cause(cause_name(c)) == c);
  CHECK_THROWS_WITH_AS(parse_cause("exploded"), doctest::Contains("'exploded'"), std::invalid_argument);
}

TEST_CASE("step outcome: run's exit codes map to their causes") {
  CHECK(cause_of_exit_code(kExitOk) == StepCause::kDone);
  CHECK(cause_of_exit_code(kExitFailed) == StepCause::kRankFailed);
  CHECK(cause_of_exit_code(kExitUsage) == StepCause::kConfig);
  CHECK(cause_of_exit_code(kExitHang) == StepCause::kHang);
  CHECK(cause_of_exit_code(kExitRequeued) == StepCause::kPreempted);
  CHECK(cause_of_exit_code(kExitPreempted) == StepCause::kPreempted);
  CHECK(cause_of_exit_code(kExitDiverged) == StepCause::kDiverged);
  CHECK(cause_of_exit_code(kExitCheckpointDirBusy) == StepCause::kFolderBusy);
}

TEST_CASE("step outcome: the file round-trips; a torn or foreign one is an error naming the path") {
  const TempDir dir;
  const std::string path = dir.path + "/step-0.outcome", name = "step-0.outcome";
  const TrustedFolder folder("the log folder", dir.path, false);
  CHECK_FALSE(read_step_outcome(folder, name).has_value());
  StepOutcome o = step_verdict(kExitFailed, "rank 1 (host node2) is gone", 104);
  o.cause = StepCause::kRankLost;
  o.rank = 1, o.host = "node2", o.started_from = 50, o.started_unix = 1.7e9, o.ended_unix = 1.7e9 + 3.5;
  o.connected_unix = 1.7e9 - 0.5;
  o.gpu_fault = "GPU 1 (GPU-1a1a): Xid 79 at 2026-12-06T08:43:05Z";
  write_step_outcome(folder, name, o);
  const auto back = read_step_outcome(folder, name);
  REQUIRE(back.has_value());
  CHECK(back->cause == StepCause::kRankLost);
  CHECK(back->exit_code == kExitFailed);
  CHECK(back->rank == 1);
  CHECK(back->host == "node2");
  CHECK(back->step == 104);
  CHECK(back->started_from == 50);
  CHECK(back->ended_unix == o.ended_unix);
  CHECK(back->connected_unix == o.connected_unix);
  CHECK(back->message == o.message);
  CHECK(back->gpu_fault == o.gpu_fault);
  // Rank 0's progress while the step runs: the step reached, no verdict yet.
  {
    StepReport report(path);
    report.connected();
    report.started(100);
    report.reached(120);  // within 0.25 s of the last write: not yet written
    CHECK(read_step_outcome(folder, name)->step == 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    report.reached(137);
  }
  const auto running = read_step_outcome(folder, name);
  REQUIRE(running.has_value());
  CHECK(running->cause == StepCause::kRunning);
  CHECK(running->connected_unix > 0);
  CHECK(running->started_from == 100);
  CHECK(running->step == 137);
  std::ofstream(path) << "{\"cause\": \"done\"";
  CHECK_THROWS_WITH_AS(read_step_outcome(folder, name), doctest::Contains(path.c_str()), std::runtime_error);
}

TEST_CASE("restart env: the supervisor's variables are read; a malformed one is an error naming it and its value") {
  RestartEnv r = restart_env_of({});
  CHECK(r.count == 0);
  CHECK(r.report_path.empty());
  r = restart_env_of({{"SLURM_TRAIN_RESTART_COUNT", "2"},
                      {"SLURM_TRAIN_RESTART_CAUSE", "rank-lost of rank 1 on node2"},
                      {"SLURM_TRAIN_FAILURE_TIME", "1796490819.369777"},
                      {"SLURM_TRAIN_STEP_REPORT", "/logs/7/step-2.outcome"}});
  CHECK(r.count == 2);
  CHECK(r.cause == "rank-lost of rank 1 on node2");
  CHECK(r.failure_unix == doctest::Approx(1796490819.369777));
  CHECK(r.report_path == "/logs/7/step-2.outcome");
  CHECK_THROWS_WITH_AS(restart_env_of({{"SLURM_TRAIN_RESTART_COUNT", "two"}}),
                       doctest::Contains("SLURM_TRAIN_RESTART_COUNT='two'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(restart_env_of({{"SLURM_TRAIN_FAILURE_TIME", "-1"}}),
                       doctest::Contains("SLURM_TRAIN_FAILURE_TIME='-1'"), std::invalid_argument);
}
