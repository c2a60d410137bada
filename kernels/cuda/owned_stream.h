// A CUDA stream (non-blocking) and one event, owned: synchronized and destroyed when the owner
// goes, also when the owner's constructor throws after making them. Declare it before the
// buffers and handles that work on the stream, so that it is destroyed after them.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace slurm_train::cuda {

class OwnedStream {
 public:
  OwnedStream() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const cudaError_t rc = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
    if (rc != cudaSuccess) {
      cudaStreamDestroy(stream_);
      cuda_fail(rc, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    }
  }
  ~OwnedStream() {
    // Errors here are not actionable (and may be the sticky error of an earlier fault).
    cudaStreamSynchronize(stream_);
    cudaEventDestroy(event_);
    cudaStreamDestroy(stream_);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudaEvent_t event() const { return event_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

}  // namespace slurm_train::cuda
