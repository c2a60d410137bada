// The GPT's training step resident on one GPU (built only with SLURM_TRAIN_WITH_CUDA): the model
// of train/models/gpt.h, pass for pass, with the CUDA kernels of kernels/cuda/transformer_kernels.h and
// cuBLASLt products; the same initial parameters (gpt_initialize), dropout masks
// (counter-based, as Gpt's sites), loss scale, clipping and AdamW (matrices decayed, vectors not)
// as CpuGptStep, so that in fp32 the two agree to rounding.
//
//   forward   embedding; per block LayerNorm, the qkv product (bias in the epilogue), fused
//             causal attention (online softmax, only the logsumexp kept), the projection,
//             residual, LayerNorm, c_fc (bias in the epilogue), GELU, c_proj, residual; the final
//             LayerNorm and the tied head (logits = lnf wte^T), cross-entropy fused with its gradient
//   backward  the same in reverse; every parameter's gradient in fp32, each tensor handed to the
//             gradient buckets (NCCL, with reduce_gradients_with) as soon as it is complete
//   update    DeviceOptimizer's (device_optimizer.h), the MLP step's too: the global norm and
//             the clipping factor stay on the GPU; AdamW over the packed parameters, in runs of
//             decayed (matrices) and undecayed (vectors) tensors
//
// With the optimizer state sharded (ZeRO stage 1, train.shard_optimizer): each bucket is
// reduce-scattered into the ranks' shards (whole blocks of the norm, shard_cuts), each rank
// updates its shard, and the ranks all-gather the parameters; by the rules of
// train/steps/sharded_optimizer.h the parameters are the replicated path's bit for bit on two ranks.
//
// Precision: fp32 and tf32 (fp32 storage; tf32: the products on TF32 tensor cores); bf16: the
// products read bf16 copies of their operands (a bf16 working copy of the weights, refreshed by
// the update; the activations cast once in the forward pass and kept for the backward one;
// GELU's output and the logits' gradient written in bf16 only, where cuBLASLt takes their
// products in bf16) and accumulate in fp32, and so does the attention's (tensor cores,
// flash_attention.h); everything else (activations, LayerNorm, softmax, master weights,
// gradients, optimizer state) is fp32. The parameters keep the packed (checkpoint) layout on the
// device too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cuda/lt_matmul.h"
#include "train/comm/comm.h"
#include "train/models/gpt.h"
#include "train/steps/optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

struct CudaGptStepOptions {
  cuda::Precision precision = cuda::Precision::kFp32;
  bool deterministic = false;  // cuBLASLt algorithms without split-K reductions
  int max_rows = 8;            // the most windows (of block tokens) a step or an evaluation slice gets
  float loss_scale = 1.0f;     // 1 / (global batch * block), as CpuGptStepOptions
  float dropout = 0.0f;
  std::uint64_t dropout_seed = 0;
  double bucket_mb = 4.0;  // gradient all-reduce buckets, with reduce_gradients_with
  bool fuse_bias = true;   // false: biases added by the element-wise kernels, not the GEMM epilogue
  // bf16: the attention on tensor cores (kernels/cuda/flash_attention.h) where it takes the head
  // size; otherwise, and in fp32 and tf32, the fp32 fused kernels.
  bool flash_attention = true;
};

class CudaGptStep final : public TrainStep {
 public:
  // On the current device (cudaSetDevice before), from parameters in gpt_layout(config)'s packed
  // order (gpt_initialize's). Throws std::invalid_argument for a shape the kernels cannot take
  // (a head size over kMaxAttentionHeadSize).
  CudaGptStep(const GptConfig& config, const OptimizerConfig& optimizer, const CudaGptStepOptions& options,
              std::span<const float> initial_parameters);
  ~CudaGptStep() override;
  CudaGptStep(const CudaGptStep&) = delete;
  CudaGptStep& operator=(const CudaGptStep&) = delete;

  // batch.tokens and batch.y: rows windows of block tokens each (host memory).
  void forward(const StepBatch& batch) override;
  void backward() override;
  StepLoss local_loss() override;
  void finish_gradients() override;
  double clip_gradients() override;
  void update(float lr, std::uint64_t step) override;
  StepLoss evaluate(const StepBatch& batch) override;
  const ModelLayout& model_layout() const override;
  HostState host_state() override;
  void state_to_host() override;
  void state_from_host() override;
  std::optional<std::vector<float>> global_gradients() override;
  bool state_sharded() const override;
  void shard_to_host() override;
  std::optional<StateShard> state_shard() override;

  // A whole step queued without waiting for the GPU (the clipping factor stays there): forward,
  // backward, the gradient sum, clipping and the update. For benchmarks; local_loss() reads its loss.
  void train_step(const StepBatch& batch, float lr, std::uint64_t step);
  // After forward(): the logits [rows * block, vocab] of the last pass, and after backward() the
  // packed gradients (both wait for the GPU). With the optimizer state sharded, the gradients
  // are this rank's own: their sum over the ranks is reduced into its shard alone.
  std::vector<float> logits();
  std::vector<float> gradients();
  // The fp32 master parameters in the packed layout (waits).
  HostVector<float> parameters();
  cudaStream_t stream() const;
  // Sums the gradients over ranks in buckets during backward, through a Comm over device memory
  // (make_nccl_comm with this step's stream() as its compute stream), which must outlive the
  // step. With shard_optimizer, this rank keeps its shard of the optimizer state only; once,
  // before training.
  void reduce_gradients_with(Comm& comm, bool shard_optimizer = false);
  // Bytes of optimizer state on this rank's GPU (sharded: its shard's).
  std::size_t optimizer_state_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace slurm_train
