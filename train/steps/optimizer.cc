#include "train/steps/optimizer.h"

#include <algorithm>
#include <cmath>

#include "train/io/huge_pages.h"

namespace slurm_train {

float learning_rate_at(const OptimizerConfig& c, std::uint64_t step, std::uint64_t total_steps) {
  if (c.schedule == Schedule::kConstant) return c.lr;
  if (step < c.warmup_steps) return c.lr * static_cast<float>(step + 1) / static_cast<float>(c.warmup_steps);
  const std::uint64_t decay_steps = total_steps > c.warmup_steps ? total_steps - c.warmup_steps : 1;
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup_steps) /
                                            static_cast<double>(std::max<std::uint64_t>(decay_steps - 1, 1)));
  const double floor = c.lr * c.min_lr_ratio;
  return static_cast<float>(floor + (c.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<LayerLayout> layers, std::size_t parameters)
    : config_(config), layers_(std::move(layers)) {
  resize_in_huge_pages(first_, parameters, 0.0f);
  if (config_.kind == OptimizerKind::kAdamW) resize_in_huge_pages(second_, parameters, 0.0f);
}

void apply_update(const OptimizerConfig& c, const std::vector<LayerLayout>& layers, kernels::Kernels<float>& k,
                  float* params, const float* grads, float* first, float* second, std::size_t begin, std::size_t end,
                  float lr, std::uint64_t step) {
  for (const LayerLayout& L : layers) {
    // Weights with decay, biases without: two passes a layer, each one fused update.
    const std::size_t segments[2][2] = {{L.weight, L.bias}, {L.bias, L.end()}};
    for (int s = 0; s < 2; ++s) {
      const std::size_t from = std::max(segments[s][0], begin), to = std::min(segments[s][1], end);
      if (from >= to) continue;
      const std::size_t n = to - from, at = from - begin;
      const float decay = s == 0 ? c.weight_decay : 0.0f;
      if (c.kind == OptimizerKind::kAdamW) {
        kernels::AdamWParams h{lr, c.beta1, c.beta2, c.eps, decay, static_cast<long>(step + 1)};
        k.adamw_update(n, params + from, grads + at, first + at, second + at, h);
      } else {
        kernels::SgdParams h{lr, c.momentum, decay, c.nesterov};
        k.sgd_update(n, params + from, grads + at, first + at, h);
      }
    }
  }
}

void Optimizer::update(kernels::Kernels<float>& k, HostVector<float>& params, const std::vector<float>& grads, float lr,
                       std::uint64_t step) {
  apply_update(config_, layers_, k, params.data(), grads.data(), first_.data(), second_.data(), 0, params.size(), lr,
               step);
}

double clip_by_global_norm(kernels::Kernels<float>& k, std::vector<float>& grads, float max_norm) {
  const double norm = std::sqrt(k.sum_of_squares(grads.size(), grads.data()));
  if (max_norm > 0.0f && norm > max_norm)
    k.scale(grads.size(), static_cast<float>(max_norm / (norm + 1e-6)), grads.data());
  return norm;
}

}  // namespace slurm_train
