// The MLP's training step on the CPU: Mlp with the OpenBLAS (or reference) kernels, and the
// optimizer's side of the step (step_optimizer.h: gradients summed over the ranks in buckets
// during backward, clipping by the global norm, the update, its state whole or sharded). The
// numerics every other step is checked against.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/models/mlp.h"
#include "train/steps/optimizer.h"
#include "train/steps/step_optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

struct CpuMlpStepOptions {
  float label_smoothing = 0.0f;
  float loss_scale = 1.0f;         // the loss's factor: 1 / global batch (the loss is a mean)
  std::uint64_t dropout_seed = 0;  // with the row index, keys the dropout masks
  double bucket_mb = 4.0;          // gradient all-reduce buckets, with a Comm
  bool shard_optimizer = false;    // with a Comm: the optimizer state sharded (sharded_optimizer.h)
};

class CpuMlpStep final : public TrainStep {
 public:
  // Parameters initialised from `seed` (Mlp::initialize). With `comm` (which must outlive the
  // step), gradients are summed over its ranks; without, they stay this process's.
  CpuMlpStep(const MlpShape& shape, const OptimizerConfig& optimizer, const CpuMlpStepOptions& options,
             std::unique_ptr<kernels::Kernels<float>> kernels, std::uint64_t seed, Comm* comm);

  void forward(const StepBatch& batch) override;
  void backward() override;
  StepLoss local_loss() override { return loss_; }
  void finish_gradients() override;
  double clip_gradients() override;
  void update(float lr, std::uint64_t step) override;
  StepLoss evaluate(const StepBatch& batch) override;
  const ModelLayout& model_layout() const override { return layout_; }
  HostState host_state() override;
  void state_to_host() override;
  bool state_sharded() const override { return optimizer_.sharded(); }
  std::optional<StateShard> state_shard() override;
  std::optional<std::vector<float>> global_gradients() override;
  void state_from_host() override;

  // Bytes of optimizer state this rank holds (sharded: its shard's).
  std::size_t optimizer_state_bytes() const { return optimizer_.state_bytes(); }

 private:
  std::unique_ptr<kernels::Kernels<float>> kernels_;
  Mlp<float> model_;
  ModelLayout layout_;
  CpuMlpStepOptions o_;
  StepOptimizer optimizer_;
  StepBatch batch_;
  StepLoss loss_;
  std::vector<float> dlogits_;
};

// BLAS threads for this rank: `configured` if set, else this rank's share of the CPUs it may
// use (all of them when Slurm or the plugin already bound it to a subset).
int blas_threads_for_rank(int configured, int local_size);

}  // namespace slurm_train
