// Checked calls into the CUDA runtime and cuBLASLt: CUDA_CHECK(cudaMalloc(...)) throws CudaError
// naming the call, the file and line, the library's own error name and message, and a hint at
// the likely cause. Exceptions go up to the launcher's one handler, which tears the whole job
// down (a rank that exits alone leaves the others hanging). Host code only; kernel launches are
// checked with CUDA_CHECK(cudaGetLastError()).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>

namespace slurm_train::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void cuda_fail(cudaError_t rc, const char* call, const char* file, int line);
[[noreturn]] void cublas_fail(cublasStatus_t rc, const char* call, const char* file, int line);
// cudaMalloc found too little memory: names the size asked for, what the device has free, and
// what the run can lower.
[[noreturn]] void out_of_device_memory(std::size_t bytes, const char* file, int line);

}  // namespace slurm_train::cuda

#define CUDA_CHECK(call)                                                                                          \
  do {                                                                                                            \
    const cudaError_t cuda_check_rc_ = (call);                                                                    \
    if (cuda_check_rc_ != cudaSuccess) ::slurm_train::cuda::cuda_fail(cuda_check_rc_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                           \
  do {                                                                               \
    const cublasStatus_t cublas_check_rc_ = (call);                                  \
    if (cublas_check_rc_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::slurm_train::cuda::cublas_fail(cublas_check_rc_, #call, __FILE__, __LINE__); \
  } while (0)
