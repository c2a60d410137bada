// The optimizer's side of a CPU training step, whatever the model: the gradients summed over the
// ranks in buckets as backward completes them (gradient_buckets.h), clipping by the global norm,
// the update, and the state a checkpoint holds; the state whole on every rank (optimizer.h) or
// sharded over the ranks (train.shard_optimizer, sharded_optimizer.h). CpuMlpStep and CpuGptStep
// differ in their model only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/steps/gradient_buckets.h"
#include "train/steps/optimizer.h"
#include "train/steps/sharded_optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

class StepOptimizer {
 public:
  // Over `layers` (the model's packed layout) of `parameters` values. Without `comm` (which must
  // outlive it) the gradients stay this process's; `sharded` needs one.
  StepOptimizer(const OptimizerConfig& config, const std::vector<LayerLayout>& layers, std::size_t parameters,
                Comm* comm, double bucket_mb, bool sharded);

  // Backward calls this as layer (or tensor) `layer`'s gradients in `grads` are complete.
  void layer_done(float* grads, std::size_t layer) {
    if (buckets_) buckets_->layer_done(grads, layer);
  }
  bool reduces() const { return buckets_.has_value(); }
  void finish_gradients() {
    if (buckets_) buckets_->finish();
  }
  // The global norm before clipping; `grads` clipped (sharded: this rank's shard of them).
  double clip(kernels::Kernels<float>& k, std::vector<float>& grads);
  void update(kernels::Kernels<float>& k, HostVector<float>& params, const std::vector<float>& grads, float lr,
              std::uint64_t step);

  // TrainStep's view of the state, with the step's `params`: sharded, the whole moments are staged
  // for checkpoints (gathered on rank 0) and resumes (every rank) only.
  HostState host_state(HostVector<float>& params);
  void state_to_host();
  void state_from_host();
  // Sharded: this rank's shard of the state, with the step's `params`; nullopt when whole.
  std::optional<StateShard> state_shard(const HostVector<float>& params) const;
  // Bytes of optimizer state this rank keeps (sharded: its shard's).
  std::size_t state_bytes() const;
  bool sharded() const { return sharded_.has_value(); }

 private:
  OptimizerConfig config_;
  std::size_t parameters_;
  std::optional<Optimizer> whole_;
  std::optional<ShardedOptimizer> sharded_;
  HostVector<float> staged_first_, staged_second_;
  std::optional<GradientBuckets> buckets_;  // last: it may point at sharded_
};

}  // namespace slurm_train
