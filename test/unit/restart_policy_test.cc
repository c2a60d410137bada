#include "launcher/restart_policy.h"

#include <doctest/doctest.h>

#include <stdexcept>

#include "launcher/exit_codes.h"

using namespace slurm_train;

namespace {

Attempt failed(int number, std::vector<std::string> nodes, StepCause cause, std::uint64_t step, std::string node = "",
               int exit_code = kExitFailed) {
  Attempt a;
  a.number = number;
  a.nodes = std::move(nodes);
  a.cause = cause;
  a.step_reached = step;
  a.node = std::move(node);
  a.exit_code = exit_code;
  return a;
}

const std::vector<std::string> kAllocation{"n1", "n2", "n3", "n4"};

}  // namespace

TEST_CASE("restart policy: a lost node's step restarts on the healthy nodes and a spare, the last step's nodes first") {
  const std::vector<Attempt> attempts{failed(0, {"n1", "n2", "n3"}, StepCause::kRankLost, 104, "n2")};
  const NextStep next = next_step(attempts, kAllocation, {"n2"}, 3, RestartLimits{});
  CHECK(next.restart);
  CHECK(next.nodes == std::vector<std::string>{"n1", "n3", "n4"});
}

TEST_CASE("restart policy: only a node-level cause is the node's fault") {
  CHECK(node_level_cause(StepCause::kRankLost));
  CHECK(node_level_cause(StepCause::kHang));
  CHECK(node_level_cause(StepCause::kNeverConnected));
  CHECK_FALSE(node_level_cause(StepCause::kRankFailed));
  CHECK_FALSE(node_level_cause(StepCause::kDiverged));
  CHECK_FALSE(node_level_cause(StepCause::kConfig));
}

TEST_CASE("restart policy: an Xid or ECC error on the rank's GPU leaves its node out, whatever the cause") {
  Attempt a = failed(0, {"n1", "n2"}, StepCause::kRankFailed, 120, "n2", kExitFailed);
  CHECK(node_fault({}, a).empty());  // a rank's own error: its node is not to blame
  a.gpu_fault = "GPU 1 (GPU-1a1a): Xid 79 at 2026-12-06T08:43:05Z";
  CHECK(node_fault({}, a) == "GPU 1 (GPU-1a1a): Xid 79 at 2026-12-06T08:43:05Z there");
  a.node.clear();  // no node named: none to leave out
  CHECK(node_fault({}, a).empty());
}

TEST_CASE("restart policy: success, a configuration error, a preemption, a busy folder and a give-up never restart") {
  for (const auto& [cause, code] :
       std::vector<std::pair<StepCause, int>>{{StepCause::kDone, kExitOk},
                                              {StepCause::kConfig, kExitUsage},
                                              {StepCause::kPreempted, kExitRequeued},
                                              {StepCause::kFolderBusy, kExitCheckpointDirBusy},
                                              {StepCause::kGaveUp, kExitDoNotRequeue}}) {
    CAPTURE(cause_name(cause));
    const NextStep next = next_step({failed(0, {"n1", "n2"}, cause, 10, "", code)}, kAllocation, {}, 2, {});
    CHECK_FALSE(next.restart);
    CHECK(next.exit_code == code);
    CHECK(!next.why.empty());
  }
}

TEST_CASE("restart policy: the same failure at the same step twice in a row ends the job, not R restarts") {
  std::vector<Attempt> attempts{failed(0, {"n1", "n2"}, StepCause::kDiverged, 37, "", kExitDiverged),
                                failed(1, {"n1", "n2"}, StepCause::kDiverged, 37, "", kExitDiverged)};
  NextStep next = next_step(attempts, kAllocation, {}, 2, RestartLimits{10, false, 1});
  CHECK_FALSE(next.restart);
  CHECK(next.exit_code == kExitDiverged);
  CHECK(next.why.find("twice in a row") != std::string::npos);
  // Another step, or another cause, is a new failure.
  attempts[1].step_reached = 38;
  CHECK(next_step(attempts, kAllocation, {}, 2, RestartLimits{10, false, 1}).restart);
  attempts[1].step_reached = 37;
  attempts[1].cause = StepCause::kRankFailed;
  CHECK(next_step(attempts, kAllocation, {}, 2, RestartLimits{10, false, 1}).restart);
}

TEST_CASE("restart policy: --restarts R allows R restarts, then the last step's exit code ends the job") {
  std::vector<Attempt> attempts;
  for (int i = 0; i < 3; ++i) attempts.push_back(failed(i, {"n1", "n2"}, StepCause::kRankFailed, 10 * (i + 1)));
  CHECK(next_step(attempts, kAllocation, {}, 2, RestartLimits{3, false, 1}).restart);
  const NextStep next = next_step(attempts, kAllocation, {}, 2, RestartLimits{2, false, 1});
  CHECK_FALSE(next.restart);
  CHECK(next.exit_code == kExitFailed);
  CHECK(next.why.find("--restarts=2") != std::string::npos);
}

TEST_CASE("restart policy: without a spare the job ends, unless --allow-fewer lets it go on with fewer nodes") {
  const std::vector<Attempt> attempts{failed(0, {"n1", "n2"}, StepCause::kRankLost, 50, "n2")};
  const std::vector<std::string> two{"n1", "n2"};
  NextStep next = next_step(attempts, two, {"n2"}, 2, RestartLimits{3, false, 1});
  CHECK_FALSE(next.restart);
  CHECK(next.why.find("no spare node left") != std::string::npos);
  CHECK(next.why.find("n2") != std::string::npos);
  next = next_step(attempts, two, {"n2"}, 2, RestartLimits{3, true, 1});
  CHECK(next.restart);
  CHECK(next.nodes == std::vector<std::string>{"n1"});
  CHECK_FALSE(next_step(attempts, two, {"n2"}, 2, RestartLimits{3, true, 2}).restart);
}

TEST_CASE("restart policy: the record of attempts round-trips, and the nodes it left out stay out") {
  Attempt a = failed(0, {"n1", "n2"}, StepCause::kHang, 120, "n2", kExitHang);
  a.rank = 1;
  a.left_out = {"n2"};
  a.started_unix = 1.5e9, a.ended_unix = 1.5e9 + 30, a.first_step_unix = 1.5e9 + 2;
  a.started_from = 0, a.steps_lost = 20;
  a.message = "hang: rank 1 \"quoted\"";
  a.gpu_fault = "GPU 0 (GPU-0a0a): a double-bit ECC error at 2026-12-06T08:43:05Z";
  Attempt b = failed(1, {"n1", "n3"}, StepCause::kDone, 300, "", kExitOk);
  b.recovery_seconds = 4.25;
  const std::vector<Attempt> parsed = parse_attempts(format_attempts({a, b}));
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0].cause == StepCause::kHang);
  CHECK(parsed[0].nodes == a.nodes);
  CHECK(parsed[0].rank == 1);
  CHECK(parsed[0].message == a.message);
  CHECK(parsed[0].gpu_fault == a.gpu_fault);
  CHECK(parsed[1].gpu_fault.empty());
  CHECK(parsed[0].steps_lost == 20);
  CHECK(parsed[0].first_step_unix == a.first_step_unix);
  CHECK(parsed[1].recovery_seconds == 4.25);
  CHECK(nodes_left_out(parsed) == std::set<std::string>{"n2"});
  CHECK_THROWS_WITH_AS(parse_attempts("{\"attempt\": 0}\n"), doctest::Contains("line 1"), std::invalid_argument);
}

TEST_CASE(
    "restart policy: the node at fault is left out for a node-level cause, or an out-of-memory kill there twice") {
  const Attempt lost = failed(0, {"n1", "n2"}, StepCause::kRankLost, 10, "n2");
  CHECK(node_fault({}, lost) == "rank-lost there");
  CHECK(node_fault({}, failed(0, {"n1", "n2"}, StepCause::kRankFailed, 10, "n2")).empty());
  CHECK(node_fault({}, failed(0, {"n1", "n2"}, StepCause::kRankLost, 10, "")).empty());  // none named
  const Attempt oom = failed(1, {"n1", "n2"}, StepCause::kOutOfMemory, 20, "n2");
  CHECK(node_fault({lost}, oom).empty());  // the first out-of-memory kill on n2
  CHECK(node_fault({failed(0, {"n1", "n2"}, StepCause::kOutOfMemory, 5, "n1")}, oom).empty());  // another node's
  CHECK(node_fault({failed(0, {"n1", "n2"}, StepCause::kOutOfMemory, 5, "n2")}, oom).find("twice") !=
        std::string::npos);
}

TEST_CASE(
    "restart policy: a job's first step takes the allocation's nodes in order, less those a requeued job left out") {
  NodeChoice c = choose_nodes({}, kAllocation, {"n2"}, 3, RestartLimits{});
  CHECK(c.nodes == std::vector<std::string>{"n1", "n3", "n4"});
  CHECK(c.why.empty());
  c = choose_nodes({}, kAllocation, {"n1", "n2"}, 3, RestartLimits{});
  CHECK(c.nodes.empty());
  CHECK(c.why.find("left out: n1,n2") != std::string::npos);
}
