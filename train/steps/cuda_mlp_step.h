// The MLP's training step resident on one GPU (built only with SLURM_TRAIN_WITH_CUDA): the same
// model, loss, clipping and optimizer as the CPU path (train/models/mlp.h, train/steps/optimizer.h), the
// same dropout masks (counter-based, elementwise.h), from the same initial parameters.
//
//   forward   per layer one cuBLASLt product; a ReLU layer without dropout fuses bias + ReLU
//             into it (RELU_AUX_BIAS, keeping the ReLU bit-mask), other layers add bias and
//             activation (+ dropout) in one element-wise pass; the logits layer fuses its bias
//   loss      fused softmax cross-entropy and its gradient, sums reduced in double on the GPU
//   backward  per layer the weight-gradient product (fp32 gradients in every precision) and the
//             input-gradient product, which for a fused ReLU layer below applies the ReLU
//             gradient and the bias gradient in its epilogue (DRELU_BGRAD)
//   update    DeviceOptimizer's (device_optimizer.h), the GPT step's too: the global gradient
//             norm and the clipping factor stay on the GPU; one fused AdamW or SGD pass over all
//             parameters (fp32 master weights, bias without decay), which in bf16 also refreshes
//             the bf16 working copy the products read
//
// On the device each tensor starts at a multiple of 128 elements (device_parameters.h); the
// state a checkpoint holds is in the packed layout.
//
// Precision: fp32; tf32 (products on TF32 tensor cores); bf16 (bf16 weights' copy, activations
// and gradients of activations; fp32 accumulation, master weights, weight gradients, optimizer
// state, logits and loss). deterministic: cuBLASLt algorithms without split-K reductions, the
// same algorithm every call; the other kernels are deterministic always.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/lt_matmul.h"
#include "train/comm/comm.h"
#include "train/models/mlp.h"
#include "train/steps/device_batches.h"
#include "train/steps/optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

struct CudaMlpStepOptions {
  cuda::Precision precision = cuda::Precision::kFp32;
  bool deterministic = false;
  int max_rows = 256;  // the largest batch (rows of this rank) a step or evaluation gets
  float label_smoothing = 0.0f;
  float loss_scale = 1.0f;  // the loss's factor: 1 / global batch
  std::uint64_t dropout_seed = 0;
  bool fuse_epilogues = true;  // false: bias and activations by the element-wise kernels only
  double bucket_mb = 4.0;      // gradient all-reduce buckets, when a Comm is given
};

// The TrainStep on one GPU. forward() uploads the rows and queues the step's work; nothing waits
// for the GPU until local_loss() and clip_gradients() (which reads the norm back).
class CudaMlpStep final : public TrainStep {
 public:
  // On the current device (cudaSetDevice before), from parameters in mlp_layout(shape)'s order.
  CudaMlpStep(const MlpShape& shape, const OptimizerConfig& optimizer, const CudaMlpStepOptions& options,
              std::span<const float> initial_parameters);
  ~CudaMlpStep() override;
  CudaMlpStep(const CudaMlpStep&) = delete;
  CudaMlpStep& operator=(const CudaMlpStep&) = delete;

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

  // forward() on a batch already on the device (its x and y stay untouched until the step ends).
  void forward(const DeviceBatch& batch, std::uint64_t first_row);
  // A whole step queued without waiting (the clipping factor stays on the GPU): forward,
  // backward, the gradient sum, clipping and the update. For benchmarks and tests; local_loss()
  // reads its loss.
  void train_step(const float* x, const std::int32_t* y, int rows, std::uint64_t first_row, float lr,
                  std::uint64_t step);
  void train_step(const DeviceBatch& batch, std::uint64_t first_row, float lr, std::uint64_t step);
  // The fp32 master parameters in the packed layout (waits).
  HostVector<float> parameters();
  cudaStream_t stream() const;
  // Sums the gradients over ranks in buckets during backward, through a Comm over device memory
  // (make_nccl_comm with this step's stream() as its compute stream). The loss sums stay local.
  void reduce_gradients_with(Comm& comm);
  // Which hidden layers ran fused in the last forward pass, for the log.
  std::vector<bool> fused_layers() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace slurm_train
