// Owning buffers in GPU memory and in pinned (page-locked) host memory. Pinned memory is what
// cudaMemcpyAsync needs to copy without a staging copy and without blocking the host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace slurm_train::cuda {

template <typename T, bool kPinnedHost>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) { resize(n); }
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Reallocates (contents lost) only when n exceeds the current size.
  void resize(std::size_t n) {
    if (n <= size_) return;
    release();
    void* p = nullptr;
    if constexpr (kPinnedHost) {
      CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)));
    } else {
      const cudaError_t rc = cudaMalloc(&p, n * sizeof(T));
      if (rc == cudaErrorMemoryAllocation) out_of_device_memory(n * sizeof(T), __FILE__, __LINE__);
      if (rc != cudaSuccess) cuda_fail(rc, "cudaMalloc", __FILE__, __LINE__);
    }
    data_ = static_cast<T*>(p);
    size_ = n;
  }
  T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    // Errors while freeing are not actionable (and may be the sticky error of an earlier fault).
    if constexpr (kPinnedHost)
      cudaFreeHost(data_);
    else
      cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
using DeviceBuffer = Buffer<T, false>;
template <typename T>
using PinnedBuffer = Buffer<T, true>;

}  // namespace slurm_train::cuda
