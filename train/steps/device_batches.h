// Batches to the GPU: each batch is copied into one of two pinned host buffers and from there to
// one of two device buffers with cudaMemcpyAsync on a copy stream, so that the copy of batch k+1
// overlaps the compute of batch k. Events order everything without stalling the host: the
// compute stream waits for a batch's copy, and a device buffer is refilled only once the
// compute stream has passed the work queued with it two batches before. Host-side, a pinned
// buffer is refilled only after its previous copy has finished (the one wait there is).
// Built only with SLURM_TRAIN_WITH_CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_buffer.h"

namespace slurm_train {

struct DeviceBatch {
  const float* x = nullptr;         // rows x features, on the device
  const std::int32_t* y = nullptr;  // rows
  int rows = 0;
};

class DeviceBatchUploader {
 public:
  DeviceBatchUploader(std::size_t max_rows, std::size_t features, cudaStream_t compute);
  ~DeviceBatchUploader();
  DeviceBatchUploader(const DeviceBatchUploader&) = delete;
  DeviceBatchUploader& operator=(const DeviceBatchUploader&) = delete;

  // Queues the copy of x[rows, features] and y[rows]; work queued on the compute stream after
  // this call sees the batch. The batch stays valid until the call after next.
  DeviceBatch upload(const float* x, const std::int32_t* y, int rows);

 private:
  struct Slot {
    cuda::PinnedBuffer<float> host_x;
    cuda::PinnedBuffer<std::int32_t> host_y;
    cuda::DeviceBuffer<float> x;
    cuda::DeviceBuffer<std::int32_t> y;
    cudaEvent_t copied = nullptr, consumed = nullptr;
  };
  std::size_t max_rows_, features_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  Slot slots_[2];
  int next_ = 0;
  bool used_[2] = {false, false};
};

}  // namespace slurm_train
