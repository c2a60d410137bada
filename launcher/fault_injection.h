// --inject-fault: faults on purpose, a testing aid for the watchdog, the failure teardown and
// preemption. A spec is a comma-separated list of
//   hang@STEP:RANK    RANK stops making progress in the forward pass of step STEP
//   crash@STEP:RANK   RANK kills itself with SIGKILL in the forward pass of step STEP
//   slow@MS           every step of every rank takes MS milliseconds longer
//   slow@MS:RANK      every step of RANK alone takes MS milliseconds longer (a straggler)
//   slow-ckpt@MS      a checkpoint is written 64 KiB at a time, MS milliseconds after each, so
//                     that a test can kill the run in the middle of a write
//   nan@STEP:RANK     RANK's loss of step STEP is NaN, as in a diverged training
// STEP counts from 0: step 5 is the one that runs after 5 steps are done.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace slurm_train {

struct FaultPlan {
  struct At {
    std::uint64_t step = 0;
    int rank = 0;
  };
  std::optional<At> hang, crash, nan;
  unsigned slow_ms = 0, slow_checkpoint_ms = 0;
  int slow_rank = -1;  // slow@MS:RANK: that rank only; -1: every rank
  bool empty() const { return !hang && !crash && !nan && slow_ms == 0 && slow_checkpoint_ms == 0; }
};

// Throws std::invalid_argument naming the part it cannot read and the grammar.
FaultPlan parse_fault_plan(const std::string& spec);

// What the plan asks of `rank` at the start of step `step`'s forward pass.
enum class FaultAction { kNone, kHang, kCrash };
FaultAction fault_at(const FaultPlan& plan, std::uint64_t step, int rank);
// Whether the plan makes `rank`'s loss of step `step` NaN.
bool nan_at(const FaultPlan& plan, std::uint64_t step, int rank);

}  // namespace slurm_train
