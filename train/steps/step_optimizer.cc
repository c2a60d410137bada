#include "train/steps/step_optimizer.h"

#include <stdexcept>

namespace slurm_train {

StepOptimizer::StepOptimizer(const OptimizerConfig& config, const std::vector<LayerLayout>& layers,
                             std::size_t parameters, Comm* comm, double bucket_mb, bool sharded)
    : config_(config), parameters_(parameters) {
  const auto bucket_bytes = static_cast<std::size_t>(bucket_mb * 1024 * 1024);
  if (sharded) {
    if (!comm) throw std::invalid_argument("a sharded optimizer needs the ranks' Comm");
    sharded_.emplace(*comm, config, layers, parameters);
    buckets_.emplace(*comm, layers, bucket_bytes, sharded_->gradient_shard());
    return;
  }
  whole_.emplace(config, layers, parameters);
  if (comm) buckets_.emplace(*comm, layers, bucket_bytes);
}

double StepOptimizer::clip(kernels::Kernels<float>& k, std::vector<float>& grads) {
  if (sharded_) return sharded_->clip(k, config_.clip_norm);
  return clip_by_global_norm(k, grads, config_.clip_norm);
}

void StepOptimizer::update(kernels::Kernels<float>& k, HostVector<float>& params, const std::vector<float>& grads,
                           float lr, std::uint64_t step) {
  if (sharded_) return sharded_->update(k, params, lr, step);
  whole_->update(k, params, grads, lr, step);
}

HostState StepOptimizer::host_state(HostVector<float>& params) {
  if (whole_) return {&params, &whole_->first_state(), &whole_->second_state()};
  // What a resume reads into (rank 0) and broadcasts (every rank), sized for it.
  // Zeros where they are new: a fresh start's moments, on ranks that a resume sends nothing.
  staged_first_.resize(parameters_, 0.0f);
  staged_second_.resize(config_.kind == OptimizerKind::kAdamW ? parameters_ : 0, 0.0f);
  return {&params, &staged_first_, &staged_second_};
}

void StepOptimizer::state_to_host() {
  if (sharded_) sharded_->gather_state(staged_first_, staged_second_);
}

void StepOptimizer::state_from_host() {
  if (!sharded_) return;
  sharded_->take_state(staged_first_, staged_second_);
  // The shard holds it now: the whole moments are staged again only for a checkpoint (rank 0).
  HostVector<float>().swap(staged_first_);
  HostVector<float>().swap(staged_second_);
}

std::optional<StateShard> StepOptimizer::state_shard(const HostVector<float>& params) const {
  if (!sharded_) return std::nullopt;
  return StateShard{sharded_->begin(), sharded_->end(), &params, &sharded_->first(), &sharded_->second()};
}

std::size_t StepOptimizer::state_bytes() const { return sharded_ ? sharded_->state_bytes() : whole_->state_bytes(); }

}  // namespace slurm_train
