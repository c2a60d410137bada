// The GPT's training step on the CPU: Gpt (gpt.h) with the OpenBLAS (or reference) kernels, and
// the optimizer's side of the step (step_optimizer.h: gradients summed over the ranks in buckets
// as backward completes them, clipping by the global norm, AdamW decaying the matrices only, its
// state whole or sharded). Rows are windows of block tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/models/gpt.h"
#include "train/steps/optimizer.h"
#include "train/steps/step_optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

struct CpuGptStepOptions {
  float loss_scale = 1.0f;  // 1 / (global batch * block): the loss is a mean over the global batch's tokens
  double bucket_mb = 4.0;   // gradient all-reduce buckets, with a Comm
  int eval_rows = 8;        // evaluate() runs the model on at most this many windows at a time
  float dropout = 0.0f;     // in training (gpt.h says where)
  std::uint64_t dropout_seed = 0;
  bool shard_optimizer = false;  // with a Comm: the optimizer state sharded (sharded_optimizer.h)
};

class CpuGptStep final : public TrainStep {
 public:
  // Parameters initialised from `seed` (gpt_initialize). With `comm` (which must outlive the
  // step), gradients are summed over its ranks.
  CpuGptStep(const GptConfig& config, const OptimizerConfig& optimizer, const CpuGptStepOptions& options,
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
  Gpt model_;
  ModelLayout layout_;
  CpuGptStepOptions o_;
  StepOptimizer optimizer_;
  StepLoss loss_;
};

}  // namespace slurm_train
