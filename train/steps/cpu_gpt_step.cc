#include "train/steps/cpu_gpt_step.h"

#include <algorithm>
#include <stdexcept>

namespace slurm_train {

CpuGptStep::CpuGptStep(const GptConfig& config, const OptimizerConfig& optimizer, const CpuGptStepOptions& options,
                       std::unique_ptr<kernels::Kernels<float>> kernels, std::uint64_t seed, Comm* comm)
    : kernels_(std::move(kernels)),
      model_(config, *kernels_),
      layout_(gpt_model_layout(config)),
      o_(options),
      optimizer_(optimizer, layout_.layers, layout_.parameters(), comm, o_.bucket_mb, comm && o_.shard_optimizer) {
  gpt_initialize(config, seed, model_.params());
}

void CpuGptStep::forward(const StepBatch& batch) {
  if (!batch.tokens) throw std::invalid_argument("gpt step: a batch without tokens");
  const kernels::LossResult r = model_.forward_sums(batch.tokens, batch.y, batch.rows, model_.config().block,
                                                    o_.loss_scale, {o_.dropout, o_.dropout_seed, batch.first_row});
  loss_ = {r.loss_sum, r.correct};
}

void CpuGptStep::backward() {
  if (!optimizer_.reduces()) return model_.backward();
  model_.backward([&](std::size_t tensor) { optimizer_.layer_done(model_.grads().data(), tensor); });
}

void CpuGptStep::finish_gradients() { optimizer_.finish_gradients(); }

double CpuGptStep::clip_gradients() { return optimizer_.clip(*kernels_, model_.grads()); }

void CpuGptStep::update(float lr, std::uint64_t step) {
  optimizer_.update(*kernels_, model_.params(), model_.grads(), lr, step);
}

StepLoss CpuGptStep::evaluate(const StepBatch& batch) {
  // In slices: the attention keeps rows x heads x T x T probabilities per layer.
  const int T = model_.config().block;
  StepLoss sums;
  for (int begin = 0; begin < batch.rows; begin += o_.eval_rows) {
    const int rows = std::min(o_.eval_rows, batch.rows - begin);
    const std::size_t at = static_cast<std::size_t>(begin) * T;
    const kernels::LossResult r = model_.forward_sums(batch.tokens + at, batch.y + at, rows, T, 0.0f);
    sums.loss_sum += r.loss_sum;
    sums.correct += r.correct;
  }
  return sums;
}

HostState CpuGptStep::host_state() { return optimizer_.host_state(model_.params()); }

void CpuGptStep::state_to_host() { optimizer_.state_to_host(); }

std::optional<StateShard> CpuGptStep::state_shard() { return optimizer_.state_shard(model_.params()); }

std::optional<std::vector<float>> CpuGptStep::global_gradients() {
  if (optimizer_.sharded()) return std::nullopt;
  return model_.grads();
}

void CpuGptStep::state_from_host() { optimizer_.state_from_host(); }

}  // namespace slurm_train
