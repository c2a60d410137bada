// Device conversions between the storage types of the CUDA kernels (fp32, bf16) and the fp32 they
// compute in, one value or four at a time; bf16 rounds to nearest even.
#pragma once

#include <cuda_bf16.h>

namespace slurm_train::cuda {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Four adjacent values as fp32, in one 16-byte (fp32) or 8-byte (bf16) access: p aligned to four
// values.
struct alignas(8) Bf16x4 {
  __nv_bfloat16 v[4];
};
__device__ inline void load4(const float* p, float (&x)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
}
__device__ inline void load4(const __nv_bfloat16* p, float (&x)[4]) {
  const Bf16x4 v = *reinterpret_cast<const Bf16x4*>(p);
  for (int k = 0; k < 4; ++k) x[k] = to_float(v.v[k]);
}
__device__ inline void store4(float* p, const float (&x)[4]) {
  *reinterpret_cast<float4*>(p) = {x[0], x[1], x[2], x[3]};
}
__device__ inline void store4(__nv_bfloat16* p, const float (&x)[4]) {
  *reinterpret_cast<Bf16x4*>(p) = {{from_float<__nv_bfloat16>(x[0]), from_float<__nv_bfloat16>(x[1]),
                                    from_float<__nv_bfloat16>(x[2]), from_float<__nv_bfloat16>(x[3])}};
}

}  // namespace slurm_train::cuda
