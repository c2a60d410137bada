// The launcher's pure logic: fault plans, preemption signals, the restart record, requeue
// targets, the watchdog's verdict and the progress line.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "launcher/fault_injection.h"
#include "launcher/login_node.h"
#include "launcher/watchdog_wire.h"
#include "launcher/mpi_plugin_check.h"
#include "launcher/preempt_signals.h"
#include "launcher/progress_line.h"
#include "launcher/rank_log.h"
#include "launcher/rank_status.h"
#include "launcher/requeue.h"
#include "launcher/restart_record.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("fault plans: hang, crash and slow, comma-separated") {
  const FaultPlan plan = parse_fault_plan("hang@12:3,slow@25");
  REQUIRE(plan.hang);
  CHECK(plan.hang->step == 12);
  CHECK(plan.hang->rank == 3);
  CHECK_FALSE(plan.crash);
  CHECK(plan.slow_ms == 25);
  CHECK(fault_at(plan, 12, 3) == FaultAction::kHang);
  CHECK(fault_at(plan, 12, 2) == FaultAction::kNone);
  CHECK(fault_at(plan, 11, 3) == FaultAction::kNone);
  CHECK(fault_at(parse_fault_plan("crash@0:0"), 0, 0) == FaultAction::kCrash);
  CHECK(parse_fault_plan("").empty());
  const FaultPlan nan = parse_fault_plan("nan@7:1");
  CHECK(nan_at(nan, 7, 1));
  CHECK_FALSE(nan_at(nan, 7, 0));
  CHECK_FALSE(nan_at(plan, 12, 3));
  CHECK(fault_at(nan, 7, 1) == FaultAction::kNone);
  const FaultPlan slow_checkpoints = parse_fault_plan("slow-ckpt@20");
  CHECK(slow_checkpoints.slow_checkpoint_ms == 20);
  CHECK(slow_checkpoints.slow_ms == 0);
  CHECK_FALSE(slow_checkpoints.empty());
}

TEST_CASE("fault plans: anything else is refused naming the part and the grammar") {
  for (const char* bad : {"hang", "hang@", "hang@5", "hang@5:", "hang@x:1", "hang@5:-1", "explode@1:1", "slow@fast", "hang@5:1,", "slow-ckpt@", "slow-ckpt@-1"})
    check_refused<std::invalid_argument>([&] { parse_fault_plan(bad); }, "expected hang@STEP:RANK, crash@STEP:RANK, nan@STEP:RANK or slow@MS");
  check_refused<std::invalid_argument>([] { parse_fault_plan("hang@1:1,boom@2:2"); }, "cannot read 'boom@2:2'");
}

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

TEST_CASE("the restart record counts starts in a row from the same step") {
  RestartRecord r = next_start(std::nullopt, 0);
  CHECK(r.starts == 1);
  CHECK(r.restarts_without_progress == 0);
  r = next_start(r, 100);  // got further: progress
  CHECK(r.restarts_without_progress == 0);
  r = next_start(r, 100);
  r = next_start(r, 100);
  CHECK(r.starts == 4);
  CHECK(r.restarts_without_progress == 2);
  CHECK_FALSE(should_give_up(r, 2));
  r = next_start(r, 100);
  CHECK(should_give_up(r, 2));
  CHECK_FALSE(should_give_up(r, 0));  // 0: never give up
  CHECK(next_start(r, 150).restarts_without_progress == 0);

  r.last_step_reached = 123;
  const RestartRecord back = parse_restart_record(format_restart_record(r));
  CHECK(back.starts == r.starts);
  CHECK(back.restarts_without_progress == r.restarts_without_progress);
  CHECK(back.last_start_step == r.last_start_step);
  CHECK(back.last_step_reached == 123);
  check_refused<std::invalid_argument>([] { parse_restart_record("starts = 1\n"); }, "expected the keys");
  check_refused<std::invalid_argument>([] { parse_restart_record("starts = one\n"); }, "cannot read the line 'starts = one'");
}

TEST_CASE("the restart record survives a round trip through its file, and a damaged one is named") {
  const std::string dir = std::filesystem::temp_directory_path() / "slurm-train-restart-test";
  std::filesystem::remove_all(dir);
  CHECK_FALSE(read_restart_record(dir));
  write_restart_record(dir, next_start(std::nullopt, 7));
  const auto read = read_restart_record(dir);
  REQUIRE(read);
  CHECK(read->last_start_step == 7);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    CHECK(entry.path().filename().string() == "restarts");  // no temporary file left
  std::ofstream(dir + "/restarts") << "garbage\n";
  check_refused<std::runtime_error>([&] { read_restart_record(dir); }, dir + "/restarts' is damaged");
  std::filesystem::remove_all(dir);
}

TEST_CASE("requeue: facts from scontrol, the array task's target, and when not to") {
  const JobFacts plain = parse_scontrol_show_job(
      "JobId=42 JobName=train UserId=root(0) Priority=1 Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0");
  CHECK(plain.job_id == "42");
  CHECK(plain.batch);
  CHECK(plain.requeue);
  CHECK(requeue_target(plain) == "42");
  CHECK_FALSE(why_not_requeueable(plain));

  const JobFacts array = parse_scontrol_show_job("JobId=57 ArrayJobId=55 ArrayTaskId=2 JobName=sweep Requeue=1 BatchFlag=1");
  CHECK(requeue_target(array) == "55_2");

  const JobFacts interactive = parse_scontrol_show_job("JobId=60 JobName=bash Requeue=1 BatchFlag=0");
  REQUIRE(why_not_requeueable(interactive));
  CHECK(why_not_requeueable(interactive)->find("not a batch job") != std::string::npos);
  const JobFacts no_requeue = parse_scontrol_show_job("JobId=61 Requeue=0 BatchFlag=1");
  REQUIRE(why_not_requeueable(no_requeue));
  CHECK(why_not_requeueable(no_requeue)->find("sbatch --requeue") != std::string::npos);
  check_refused<std::invalid_argument>([] { parse_scontrol_show_job("slurm_load_jobs error: Invalid job id"); }, "no JobId=");
}

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
                                   status(2, 20, TrainPhase::kAllreduce, 31), status(3, 20, TrainPhase::kAllreduce, 30)};
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

TEST_CASE("progress line, durations and the moving mean") {
  CHECK(format_duration(42) == "42 s");
  CHECK(format_duration(185) == "3:05");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_progress(1200, 4800, 0.41234, 51234.4, 185) == "step 1200/4800 (25%)  loss 0.4123  samples/s 51234  eta 3:05");
  CHECK(format_progress(10, 40, 2.5, 100.4, 5, 128) == "step 10/40 (25%)  loss 2.5000  tokens/s 12851  eta 5 s");
  MovingMean m(2);
  m.add(1);
  m.add(2);
  m.add(4);
  CHECK(m.mean() == doctest::Approx(3.0));
  CHECK(format_rank_list({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8");
}

TEST_CASE("rank logs go under the job id; an array task is <array>_<task>") {
  CHECK(log_job_id({{"SLURM_JOB_ID", "42"}}) == "42");
  CHECK(log_job_id({{"SLURM_JOB_ID", "57"}, {"SLURM_ARRAY_JOB_ID", "55"}, {"SLURM_ARRAY_TASK_ID", "2"}}) == "55_2");
  CHECK(log_job_id({}).empty());
}

TEST_CASE("a GPU configuration outside any allocation or launcher, on a machine without a GPU, is sent to submit") {
  RunConfig config;
  config.train.device = "cuda";
  const auto refusal = login_node_refusal(config, {{"PATH", "/usr/bin"}}, "job.toml", 0);
  REQUIRE(refusal);
  CHECK(refusal->find("slurm-train submit job.toml --nodes 1 --gpus-per-node 1") != std::string::npos);
  CHECK(refusal->find("login node") != std::string::npos);
  CHECK_FALSE(login_node_refusal(config, {{"SLURM_JOB_ID", "42"}}, "job.toml", 0));
  CHECK_FALSE(login_node_refusal(config, {{"OMPI_COMM_WORLD_SIZE", "2"}}, "job.toml", 0));
  CHECK_FALSE(login_node_refusal(config, {}, "job.toml", 1));  // a machine with a GPU trains on it
  config.train.device = "auto";
  CHECK_FALSE(login_node_refusal(config, {}, "job.toml", 0));
}

TEST_CASE("srun of several tasks without an MPI plugin is named in one line") {
  std::map<std::string, std::string> env = {{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}};
  CHECK(missing_mpi_plugin(env) == "srun started 2 tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)");
  for (const char* pmi : {"PMIX_RANK", "PMI_FD", "OMPI_COMM_WORLD_RANK"}) {
    auto with = env;
    with[pmi] = "0";
    CHECK_FALSE(missing_mpi_plugin(with));
  }
  env["SLURM_NTASKS"] = "1";  // one task: MPI starts as a singleton
  CHECK_FALSE(missing_mpi_plugin(env));
  CHECK_FALSE(missing_mpi_plugin({{"SLURM_NTASKS", "4"}}));  // a batch script, not a step
}

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
