// The standard normal distribution's CDF Φ(x) and density φ(x) in single precision, from +, -,
// *, / and bit operations alone. GELU's exact form is x Φ(x), and its derivative Φ(x) + x φ(x);
// through libm's erff and expf those are a call per element that no loop vectorizes (they were a
// fifth of a CPU step of the tiny GPT). Without a call, GCC vectorizes the loops; without fused
// multiply-add (the CPU kernels are compiled with -ffp-contract=off) every vector width rounds
// exactly as the scalar code does.
//
// Method: for z = |x| / sqrt 2, erfc(z) = t g(t) exp(-z^2) with t = 1 / (1 + z / 2), where g is a
// degree-8 polynomial fitted (weighted least squares, in double against mpmath's erfc) to
// erfc(z) exp(z^2) / t over z in [0, 9.5]; Φ(x) = erfc(z) / 2 for x < 0 and 1 - erfc(z) / 2
// otherwise. exp(-x^2 / 2) is computed from x = hi + lo with hi of 12 significant bits, so that
// hi^2 is exact: rounding x^2 would cost a relative error of x^2 ulp in the tail. Measured against
// double-precision erfc over every float step of 1e-4 in [-13, 13] (test/unit/normal_cdf_test.cc):
// relative error of Φ under 4e-7, absolute under 2e-7, of φ under 2e-7.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ST_HD_NORMAL __host__ __device__ inline
#else
#define ST_HD_NORMAL inline
#endif

namespace slurm_train::kernels {

namespace normal_detail {

ST_HD_NORMAL std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint32_t>(__float_as_uint(f));
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ST_HD_NORMAL float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// exp(a + b) for a <= 0 and |b| small against 1: Cody-Waite reduction by ln 2 (its high part has
// 16 significant bits, so n ln2_hi is exact for |n| < 256), then exp(r) on |r| <= ln 2 / 2 by its
// Taylor polynomial of degree 7 (truncation under 1e-8), scaled by 2^n built in the exponent
// bits. 0 below 2^-126 (no subnormal results).
ST_HD_NORMAL float exp_nonpositive(float a, float b) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
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

}  // namespace normal_detail

struct NormalCdfDensity {
  float cdf;      // Φ(x)
  float density;  // φ(x) = exp(-x^2 / 2) / sqrt(2 pi)
};

ST_HD_NORMAL NormalCdfDensity normal_cdf_density(float x) {
  using namespace normal_detail;
  const float hi = float_of(bits_of(x) & 0xfffff000u), lo = x - hi;
  const float e = exp_nonpositive(-0.5f * (hi * hi), -0.5f * (lo * (x + hi)));
  const float z = (x < 0.0f ? -x : x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float g = -5.994149397e-02f;
  g = g * t + 2.886475176e-01f;
  g = g * t - 4.952147815e-01f;
  g = g * t + 2.867156580e-01f;
  g = g * t - 3.219478139e-02f;
  g = g * t + 2.048667865e-01f;
  g = g * t + 2.425999561e-01f;
  g = g * t + 2.824378528e-01f;
  g = g * t + 2.820832364e-01f;
  const float half_erfc = 0.5f * (t * g) * e;
  return {x < 0.0f ? half_erfc : 1.0f - half_erfc, e * 0.398942280401432678f};
}

}  // namespace slurm_train::kernels

#undef ST_HD_NORMAL
