// Device conversions between the storage types of the CUDA kernels (fp32, bf16) and the fp32 they
// compute in; bf16 rounds to nearest even.
#pragma once

#include <cuda_bf16.h>

namespace slurm_train::cuda {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

}  // namespace slurm_train::cuda
