// The CUDA implementation of kernels::Kernels<float>: every pointer is a device pointer (labels
// included), every call is ordered on the kernels' own stream, and the calls that return a
// value (softmax_cross_entropy, sum_of_squares) wait for it. Products run through cuBLASLt in
// fp32 or with TF32 tensor cores; the bf16 path of the training step uses lt_matmul.h and
// elementwise_kernels.h directly (bf16 has no place in a Kernels<float>).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/lt_matmul.h"
#include "kernels/kernels.h"

namespace slurm_train::cuda {

struct CudaKernelOptions {
  bool tf32 = false;
  bool deterministic = false;
  cudaStream_t stream = nullptr;  // null: the kernels create their own
};

std::unique_ptr<kernels::Kernels<float>> make_cuda_kernels(const CudaKernelOptions& options = {});

// The stream a make_cuda_kernels object runs on (to order copies with it).
cudaStream_t stream_of(kernels::Kernels<float>& cuda_kernels);

}  // namespace slurm_train::cuda
