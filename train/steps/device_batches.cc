#if defined(SLURM_TRAIN_WITH_CUDA)
#include "train/steps/device_batches.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace slurm_train {

DeviceBatchUploader::DeviceBatchUploader(std::size_t max_rows, std::size_t features, cudaStream_t compute)
    : max_rows_(max_rows), features_(features), compute_(compute) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  for (Slot& s : slots_) {
    s.host_x.resize(max_rows * features);
    s.host_y.resize(max_rows);
    s.x.resize(max_rows * features);
    s.y.resize(max_rows);
    CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming));
  }
}

DeviceBatchUploader::~DeviceBatchUploader() {
  cudaStreamSynchronize(copy_);
  for (Slot& s : slots_) {
    cudaEventDestroy(s.copied);
    cudaEventDestroy(s.consumed);
  }
  cudaStreamDestroy(copy_);
}

DeviceBatch DeviceBatchUploader::upload(const float* x, const std::int32_t* y, int rows) {
  if (rows < 0 || static_cast<std::size_t>(rows) > max_rows_)
    throw std::invalid_argument("DeviceBatchUploader: a batch of " + std::to_string(rows) + " rows exceeds the " +
                                std::to_string(max_rows_) + " it was sized for");
  // Everything queued on the compute stream so far used the other slot's batch at most: mark it.
  const int other = 1 - next_;
  if (used_[other]) CUDA_CHECK(cudaEventRecord(slots_[other].consumed, compute_));
  Slot& s = slots_[next_];
  if (used_[next_]) {
    CUDA_CHECK(cudaEventSynchronize(s.copied));             // the pinned buffer is free again
    CUDA_CHECK(cudaStreamWaitEvent(copy_, s.consumed, 0));  // the device buffer is, on the GPU
  }
  const std::size_t nx = static_cast<std::size_t>(rows) * features_;
  std::memcpy(s.host_x.data(), x, nx * sizeof(float));
  std::memcpy(s.host_y.data(), y, static_cast<std::size_t>(rows) * sizeof(std::int32_t));
  CUDA_CHECK(cudaMemcpyAsync(s.x.data(), s.host_x.data(), nx * sizeof(float), cudaMemcpyHostToDevice, copy_));
  CUDA_CHECK(cudaMemcpyAsync(s.y.data(), s.host_y.data(), static_cast<std::size_t>(rows) * sizeof(std::int32_t),
                             cudaMemcpyHostToDevice, copy_));
  CUDA_CHECK(cudaEventRecord(s.copied, copy_));
  CUDA_CHECK(cudaStreamWaitEvent(compute_, s.copied, 0));
  used_[next_] = true;
  next_ = other;
  return {s.x.data(), s.y.data(), rows};
}

}  // namespace slurm_train
#endif  // SLURM_TRAIN_WITH_CUDA
