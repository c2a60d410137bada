#include "train/loop/divergence.h"

#include <fmt/format.h>

#include <cmath>

namespace slurm_train {

namespace {

std::string advice(double lr, double clip_norm) {
  return fmt::format("try a lower train.lr (now {:g}){}", lr,
                     clip_norm > 0 ? fmt::format(" or a lower train.clip_norm (now {:g})", clip_norm)
                                   : " or gradient clipping (train.clip_norm, e.g. 1.0)");
}

}  // namespace

std::optional<std::string> non_finite_step(std::uint64_t step, double loss, double grad_norm, double lr,
                                           double clip_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return std::nullopt;
  const std::string what = std::isfinite(loss) ? fmt::format("the gradient norm is {} (loss {})", grad_norm, loss)
                                               : fmt::format("the loss is {} (gradient norm {})", loss, grad_norm);
  return fmt::format(
      "training diverged at step {}: {}; stopped before the optimizer update, and no checkpoint of it "
      "was written (the newest checkpoint is older); {}",
      step, what, advice(lr, clip_norm));
}

std::optional<std::string> non_finite_parameters(std::uint64_t steps_done, std::span<const float> params) {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!std::isfinite(params[i]))
      return fmt::format(
          "training diverged: after step {} parameter {} of {} is {}; its checkpoint was not written "
          "(the newest checkpoint is older); try a lower train.lr or gradient clipping (train.clip_norm)",
          steps_done, i, params.size(), params[i]);
  return std::nullopt;
}

}  // namespace slurm_train
