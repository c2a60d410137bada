#include "launcher/heartbeat_compute.h"

namespace slurm_train {

StepCompute HeartbeatCompute::observe(double seconds, std::uint64_t step, std::optional<double> compute_seconds) {
  const std::optional<double> since = since_;
  const std::uint64_t from = step_;
  if (!since || step != from) since_ = seconds, step_ = step;
  if (!since || step <= from) return {};
  const std::uint64_t steps = step - from;
  if (compute_seconds) return {*compute_seconds, steps};
  return {(seconds - *since) / static_cast<double>(steps), steps};
}

}  // namespace slurm_train
