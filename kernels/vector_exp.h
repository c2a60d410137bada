// exp of a non-positive single-precision argument from +, -, *, and bit operations alone: no
// libm call, so that the loops it sits in vectorize (libm's expf is a call per element), and no
// fused multiply-add where the CPU kernels are compiled with -ffp-contract=off, so that every
// vector width rounds as the scalar code does. For the softmax (arguments x - max) and the normal
// density. Within 2e-7 (relative) of double-precision exp on [-87, 0] (test/unit/vector_exp_test.cc).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ST_HD_VEXP __host__ __device__ inline
#else
#define ST_HD_VEXP inline
#endif

namespace slurm_train::kernels {

namespace vector_exp_detail {

ST_HD_VEXP std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint32_t>(__float_as_uint(f));
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ST_HD_VEXP float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

}  // namespace vector_exp_detail

// exp(a + b) for a <= 0 and |b| small against 1: Cody-Waite reduction by ln 2 (its high part has
// 16 significant bits, so n ln2_hi is exact for |n| < 256), then exp(r) on |r| <= ln 2 / 2 by its
// Taylor polynomial of degree 7 (truncation under 1e-8), scaled by 2^n built in the exponent
// bits. 0 below 2^-126 (no subnormal results).
ST_HD_VEXP float exp_nonpositive(float a, float b = 0.0f) {
  using namespace vector_exp_detail;
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;             // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float clamped = a > -100.0f ? a : -100.0f;  // NaN too: the cast below stays defined
  const float n = (clamped * kLog2e + kRound) - kRound;
  const float r = ((clamped - n * kLn2Hi) - n * kLn2Lo) + b;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int e = static_cast<int>(n) + 127;
  const float scale = float_of(static_cast<std::uint32_t>(e > 0 ? e : 0) << 23);
  return e > 0 ? p * scale : 0.0f;
}

}  // namespace slurm_train::kernels
