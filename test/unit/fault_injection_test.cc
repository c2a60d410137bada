// Fault plans (--inject-fault): their grammar and what each refuses.
#include <doctest/doctest.h>

#include "launcher/fault_injection.h"
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
  for (const char* bad : {"hang", "hang@", "hang@5", "hang@5:", "hang@x:1", "hang@5:-1", "explode@1:1", "slow@fast",
                          "hang@5:1,", "slow-ckpt@", "slow-ckpt@-1"})
    check_refused<std::invalid_argument>(
        [&] { parse_fault_plan(bad); },
        "expected hang@STEP:RANK, crash@STEP:RANK, nan@STEP:RANK, slow@MS (each step) or slow@MS:RANK");
  check_refused<std::invalid_argument>([] { parse_fault_plan("hang@1:1,boom@2:2"); }, "cannot read 'boom@2:2'");
}

TEST_CASE("fault plans: slow@MS:RANK slows one rank, a straggler") {
  const FaultPlan plan = parse_fault_plan("slow@200:1");
  CHECK(plan.slow_ms == 200);
  CHECK(plan.slow_rank == 1);
  CHECK(parse_fault_plan("slow@200").slow_rank == -1);
  CHECK_THROWS_AS(parse_fault_plan("slow@200:"), std::invalid_argument);
  CHECK_THROWS_AS(parse_fault_plan("slow@200:-1"), std::invalid_argument);
}
