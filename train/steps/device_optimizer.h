// The optimizer's side of a GPU training step, whatever the model (built only with
// SLURM_TRAIN_WITH_CUDA), as StepOptimizer is the CPU steps': the fp32 master parameters and
// their gradients on the device, the gradients summed over the ranks in buckets as backward
// completes them (gradient_buckets.h, through a Comm over device memory), the global norm and
// the clipping factor kept on the GPU, the AdamW or SGD update (and the bf16 working copy of the
// weights it refreshes), the optimizer state whole on every rank or sharded over the ranks
// (ZeRO stage 1, train/steps/sharded_optimizer.h), and the state a checkpoint holds, staged in
// host memory in the packed (checkpoint) layout. CudaMlpStep and CudaGptStep differ in their
// model only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "train/comm/comm.h"
#include "train/steps/device_parameters.h"
#include "train/steps/gradient_buckets.h"
#include "train/steps/optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

class DeviceOptimizer {
 public:
  // On the current device, its work queued on `stream`, from `initial` parameters in the packed
  // layout; `bf16_copy`: the products read a bf16 working copy of the parameters.
  DeviceOptimizer(const OptimizerConfig& config, DeviceParameters layout, bool bf16_copy, cudaStream_t stream,
                  std::span<const float> initial);
  ~DeviceOptimizer();
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // The master parameters, their gradients (which backward writes) and the bf16 working copy
  // (null unless bf16_copy), in the device layout.
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  cuda::bf16* working() { return bf16_copy_ ? working_.data() : nullptr; }

  // Sums the gradients over `comm`'s ranks (which must outlive this) in buckets of about
  // `bucket_mb`; `shard`: into this rank's shard of them, whose optimizer state alone it keeps
  // (the packed layout only). Once, before the first update or state transfer.
  void reduce_with(Comm& comm, double bucket_mb, bool shard);
  // Backward calls this as unit `unit`'s gradients are complete.
  void unit_done(std::size_t unit) {
    if (buckets_) buckets_->layer_done(grads_.data(), unit);
  }
  void finish_gradients() {
    if (buckets_) buckets_->finish();
  }
  // The squared global norm and the clipping factor queued on the GPU; nothing when neither is
  // wanted.
  void queue_clip(bool norm_wanted);
  // queue_clip(true), and the global norm before clipping (waits).
  double clip();
  // The update of this rank's shard (whole: every parameter), clipped by the factor queue_clip
  // left; sharded, the ranks' shards of the parameters are then gathered.
  void update(float lr, std::uint64_t step);

  // The TrainStep's state, in the packed layout (see train_step.h).
  HostState host_state();
  void state_to_host();
  void state_from_host();
  bool sharded() const { return shard_comm_ != nullptr; }
  void shard_to_host();
  std::optional<StateShard> state_shard();
  // Bytes of optimizer state on this rank's GPU (sharded: its shard's).
  std::size_t state_bytes() const;

  // The master parameters and the gradients in the packed layout (wait).
  HostVector<float> parameters();
  std::vector<float> gradients();

 private:
  bool has_second_moment() const { return config_.kind == OptimizerKind::kAdamW; }
  std::size_t shard_size() const { return shard_end_ - shard_begin_; }
  void allocate_moments();
  // Queued: device [begin, end) of the device layout into (from) the packed host vector.
  template <class Vector>
  void download(const float* from, std::size_t begin, std::size_t end, Vector& to);
  void upload(std::span<const float> from, float* to, std::size_t begin, std::size_t end);
  void wait();

  OptimizerConfig config_;
  DeviceParameters layout_;
  bool bf16_copy_ = false;
  cudaStream_t stream_ = nullptr;
  cuda::DeviceBuffer<float> params_, grads_, m_, v_;
  cuda::DeviceBuffer<cuda::bf16> working_;
  cuda::DeviceBuffer<double> partials_, norm_sq_;  // partials: one sum of squares per norm block
  cuda::DeviceBuffer<float> clip_;
  cuda::PinnedBuffer<double> host_norm_sq_;
  bool moments_ready_ = false;  // m and v are allocated

  // Sharded: m, v and grad_shard hold this rank's shard [shard_begin, shard_end) of the
  // parameters, which begins on a norm block; whole, the shard is [0, n) and grads serves.
  Comm* shard_comm_ = nullptr;
  std::vector<std::size_t> cuts_;
  std::size_t shard_begin_ = 0, shard_end_ = 0;
  cuda::DeviceBuffer<float> grad_shard_;

  HostVector<float> host_params_, host_first_, host_second_;  // host_state()'s
  HostVector<float> host_shard_first_, host_shard_second_;    // state_shard()'s
  bool shard_on_host_ = false;                                // they and host_params are current
  std::unique_ptr<GradientBuckets> buckets_;                  // last: it points at grad_shard
};

}  // namespace slurm_train
