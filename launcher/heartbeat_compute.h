// A program's compute time per step under `slurm-train exec`, from its heartbeats, for the
// straggler judge (straggler_judge.h), pure. A heartbeat with compute seconds gives them for
// every step it advanced; one with a step alone gives its pace: the wall seconds since the
// heartbeat that last advanced the step over the steps advanced. In a synchronous data-parallel
// program every rank steps at the pace of the slowest (the others wait for it in the gradient
// all-reduce), so the pace names no straggler there: only the compute seconds tell the slow rank.
// The pace still names the slow rank of a program whose ranks do not wait for each other.
#pragma once

#include <cstdint>
#include <optional>

namespace slurm_train {

struct StepCompute {
  double seconds_per_step = 0;
  std::uint64_t steps = 0;  // 0: nothing to judge
};

class HeartbeatCompute {
 public:
  // A heartbeat seen at `seconds` (a steady clock) saying `step` and, perhaps, the compute
  // seconds of that step. The first heartbeat, one that does not advance the step and one that
  // goes back (a program that started again) give nothing; one that goes back starts the pace
  // anew.
  StepCompute observe(double seconds, std::uint64_t step, std::optional<double> compute_seconds);

 private:
  std::optional<double> since_;  // when the step last advanced
  std::uint64_t step_ = 0;
};

}  // namespace slurm_train
