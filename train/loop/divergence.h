// A diverged training: a loss or global gradient norm that is not finite (NaN, inf), or
// parameters that became so. Both values are already the same on every rank (the loss is
// all-reduced, the norm is taken over the all-reduced gradients), so every rank stops at the
// same step without a collective of its own, before the optimizer update and before any save:
// no checkpoint of a diverged state is ever committed, and a resume picks the last good one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace slurm_train {

struct TrainingDiverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What to tell when step `step` (counting from 0) has a non-finite loss or gradient norm;
// nullopt when both are finite. `lr` and `clip_norm` are the values in use, for the advice.
std::optional<std::string> non_finite_step(std::uint64_t step, double loss, double grad_norm, double lr,
                                           double clip_norm);

// The same for the parameters about to be saved after `steps_done` steps: the first
// non-finite one, or nullopt.
std::optional<std::string> non_finite_parameters(std::uint64_t steps_done, std::span<const float> params);

}  // namespace slurm_train
