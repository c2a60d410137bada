// Optimizers over the model's contiguous parameters: SGD with momentum (optionally Nesterov)
// and AdamW with decoupled weight decay; the learning-rate schedule; clipping by the global
// gradient norm. Weight decay applies to weights, never to biases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "train/models/mlp.h"

namespace slurm_train {

enum class OptimizerKind { kSgd, kAdamW };
enum class Schedule { kConstant, kWarmupCosine };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  float lr = 1e-3f;
  float momentum = 0.9f;                            // SGD
  bool nesterov = false;                            // SGD
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // AdamW
  float weight_decay = 0.0f;
  Schedule schedule = Schedule::kConstant;
  std::uint64_t warmup_steps = 0;
  float min_lr_ratio = 0.0f;  // cosine decays to lr * min_lr_ratio
  float clip_norm = 0.0f;     // 0 disables clipping
};

// The learning rate of 0-based `step` of `total_steps`: constant, or linear warmup over
// warmup_steps then cosine decay to lr * min_lr_ratio at the last step.
float learning_rate_at(const OptimizerConfig& c, std::uint64_t step, std::uint64_t total_steps);

// One update of parameters [begin, end) of the model laid out as `layers` (the whole model: 0 and
// its size; a rank's shard of a sharded optimizer): `params` is the whole model's, while `grads`,
// `first` and `second` (AdamW; SGD's second is unused) hold that range only, their element 0
// being parameter `begin`. Weights decay, biases do not. Element-wise, so a range is updated
// exactly, bit for bit, as the same elements are in an update of the whole.
void apply_update(const OptimizerConfig& config, const std::vector<LayerLayout>& layers, kernels::Kernels<float>& k,
                  float* params, const float* grads, float* first, float* second, std::size_t begin, std::size_t end,
                  float lr, std::uint64_t step);

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, std::vector<LayerLayout> layers, std::size_t parameters);

  // One update with learning rate lr; `step` is 0-based (AdamW's bias correction uses step + 1).
  void update(kernels::Kernels<float>& k, HostVector<float>& params, const std::vector<float>& grads, float lr,
              std::uint64_t step);

  // State for checkpoints: AdamW's first and second moments, or SGD's momentum buffer (second
  // empty).
  HostVector<float>& first_state() { return first_; }
  HostVector<float>& second_state() { return second_; }
  std::size_t state_bytes() const { return (first_.size() + second_.size()) * sizeof(float); }

 private:
  OptimizerConfig config_;
  std::vector<LayerLayout> layers_;
  HostVector<float> first_, second_;
};

// Scales grads so that their global norm is at most max_norm (when max_norm > 0). Returns the
// norm before clipping.
double clip_by_global_norm(kernels::Kernels<float>& k, std::vector<float>& grads, float max_norm);

}  // namespace slurm_train
