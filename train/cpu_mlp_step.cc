#include "train/cpu_mlp_step.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace slurm_train {

CpuMlpStep::CpuMlpStep(const MlpShape& shape, const OptimizerConfig& optimizer, const StepOptions& options,
                       std::unique_ptr<kernels::Kernels<float>> kernels, std::uint64_t seed, Comm* comm)
    : kernels_(std::move(kernels)),
      model_(shape, *kernels_),
      layout_(mlp_model_layout(model_.layers())),
      opt_(optimizer),
      o_(options) {
  model_.initialize(seed);
  const auto bucket_bytes = static_cast<std::size_t>(o_.bucket_mb * 1024 * 1024);
  if (comm && o_.shard_optimizer) {
    sharded_.emplace(*comm, optimizer, model_.layers(), model_.params().size());
    buckets_.emplace(*comm, model_.layers(), bucket_bytes, &*sharded_);
    return;
  }
  optimizer_.emplace(optimizer, model_.layers(), model_.params().size());
  if (comm) buckets_.emplace(*comm, model_.layers(), bucket_bytes);
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
  if (!buckets_) return model_.backward(batch_.x, dlogits_.data());
  model_.backward(batch_.x, dlogits_.data(), [&](std::size_t layer) { buckets_->layer_done(model_.grads().data(), layer); });
}

void CpuMlpStep::finish_gradients() {
  if (buckets_) buckets_->finish();
}

double CpuMlpStep::clip_gradients() {
  if (sharded_) return sharded_->clip(*kernels_, opt_.clip_norm);
  return clip_by_global_norm(*kernels_, model_.grads(), opt_.clip_norm);
}

void CpuMlpStep::update(float lr, std::uint64_t step) {
  if (sharded_) return sharded_->update(*kernels_, model_.params(), lr, step);
  optimizer_->update(*kernels_, model_.params(), model_.grads(), lr, step);
}

StepLoss CpuMlpStep::evaluate(const StepBatch& batch) {
  const int classes = model_.shape().classes;
  const float* logits = model_.forward(batch.x, batch.rows, false);
  const auto r = kernels_->softmax_cross_entropy(batch.rows, classes, logits, batch.y, 0.0f, 1.0f, nullptr);
  return {r.loss_sum, r.correct};
}

HostState CpuMlpStep::host_state() {
  if (!sharded_) return {&model_.params(), &optimizer_->first_state(), &optimizer_->second_state()};
  // Staged whole moments: what a resume reads into (rank 0) and broadcasts (every rank).
  const std::size_t n = model_.params().size();
  staged_first_.resize(n);
  staged_second_.resize(opt_.kind == OptimizerKind::kAdamW ? n : 0);
  return {&model_.params(), &staged_first_, &staged_second_};
}

void CpuMlpStep::state_to_host() {
  if (sharded_) sharded_->gather_state(staged_first_, staged_second_);
}

void CpuMlpStep::state_from_host() {
  if (!sharded_) return;
  sharded_->take_state(staged_first_, staged_second_);
  // The shard holds it now: the whole moments are staged again only for a checkpoint (rank 0).
  std::vector<float>().swap(staged_first_);
  std::vector<float>().swap(staged_second_);
}

std::size_t CpuMlpStep::optimizer_state_bytes() const {
  return sharded_ ? sharded_->state_bytes() : optimizer_->state_bytes();
}

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
