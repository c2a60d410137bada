#include "train/steps/cpu_mlp_step.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace slurm_train {

CpuMlpStep::CpuMlpStep(const MlpShape& shape, const OptimizerConfig& optimizer, const CpuMlpStepOptions& options,
                       std::unique_ptr<kernels::Kernels<float>> kernels, std::uint64_t seed, Comm* comm)
    : kernels_(std::move(kernels)),
      model_(shape, *kernels_),
      layout_(mlp_model_layout(model_.layers())),
      o_(options),
      optimizer_(optimizer, model_.layers(), model_.params().size(), comm, o_.bucket_mb, comm && o_.shard_optimizer) {
  model_.initialize(seed);
}

void CpuMlpStep::forward(const StepBatch& batch) {
  batch_ = batch;
  const int classes = model_.shape().classes;
  const float* logits = model_.forward(batch.x, batch.rows, true, o_.dropout_seed, batch.first_row);
  dlogits_.resize(static_cast<std::size_t>(batch.rows) * classes);
  const auto r = kernels_->softmax_cross_entropy(batch.rows, classes, logits, batch.y, o_.label_smoothing,
                                                 o_.loss_scale, dlogits_.data());
  loss_ = {r.loss_sum, r.correct};
}

void CpuMlpStep::backward() {
  if (!optimizer_.reduces()) return model_.backward(batch_.x, dlogits_.data());
  model_.backward(batch_.x, dlogits_.data(),
                  [&](std::size_t layer) { optimizer_.layer_done(model_.grads().data(), layer); });
}

void CpuMlpStep::finish_gradients() { optimizer_.finish_gradients(); }

double CpuMlpStep::clip_gradients() { return optimizer_.clip(*kernels_, model_.grads()); }

void CpuMlpStep::update(float lr, std::uint64_t step) {
  optimizer_.update(*kernels_, model_.params(), model_.grads(), lr, step);
}

StepLoss CpuMlpStep::evaluate(const StepBatch& batch) {
  const int classes = model_.shape().classes;
  const float* logits = model_.forward(batch.x, batch.rows, false);
  const auto r = kernels_->softmax_cross_entropy(batch.rows, classes, logits, batch.y, 0.0f, 1.0f, nullptr);
  return {r.loss_sum, r.correct};
}

HostState CpuMlpStep::host_state() { return optimizer_.host_state(model_.params()); }

void CpuMlpStep::state_to_host() { optimizer_.state_to_host(); }

std::optional<StateShard> CpuMlpStep::state_shard() { return optimizer_.state_shard(model_.params()); }

std::optional<std::vector<float>> CpuMlpStep::global_gradients() {
  if (optimizer_.sharded()) return std::nullopt;
  return model_.grads();
}

void CpuMlpStep::state_from_host() { optimizer_.state_from_host(); }

int blas_threads_for_rank(int configured, int local_size) {
  if (configured > 0) return configured;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (allowed < hardware) return std::max(1, allowed);  // already bound to its own CPUs
  return std::max(1, allowed / std::max(1, local_size));
}

}  // namespace slurm_train
