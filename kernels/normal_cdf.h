// The standard normal distribution's CDF Φ(x) and density φ(x) in single precision, from +, -,
// *, / and bit operations alone. GELU's exact form is x Φ(x), and its derivative Φ(x) + x φ(x);
// through libm's erff and expf those are a call per element that no loop vectorizes (they were a
// fifth of a CPU step of the tiny GPT). Without a call, GCC vectorizes the loops (on AVX2 only
// with -fno-trapping-math, which lets it compute both arms of the selects below: AVX2 has no
// masked operations); without fused multiply-add (the CPU kernels are compiled with
// -ffp-contract=off) every vector width rounds exactly as the scalar code does.
//
// Method: for z = |x| / sqrt 2, erfc(z) = t g(t) exp(-z^2) with t = 1 / (1 + z / 2), where g is a
// degree-8 polynomial fitted (weighted least squares, in double against mpmath's erfc) to
// erfc(z) exp(z^2) / t over z in [0, 9.5]; Φ(x) = erfc(z) / 2 for x < 0 and 1 - erfc(z) / 2
// otherwise. exp(-x^2 / 2) is computed from x = hi + lo with hi of 12 significant bits, so that
// hi^2 is exact: rounding x^2 would cost a relative error of x^2 ulp in the tail. Measured against
// double-precision erfc over every float step of 1e-4 in [-13, 13] (test/unit/normal_cdf_test.cc):
// relative error of Φ under 4e-7, absolute under 2e-7, of φ under 2e-7.
#pragma once

#include "kernels/vector_exp.h"

namespace slurm_train::kernels {

struct NormalCdfDensity {
  float cdf;      // Φ(x)
  float density;  // φ(x) = exp(-x^2 / 2) / sqrt(2 pi)
};

ST_HD_VEXP NormalCdfDensity normal_cdf_density(float x) {
  const float hi = vector_exp_detail::float_of(vector_exp_detail::bits_of(x) & 0xfffff000u), lo = x - hi;
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

#undef ST_HD_VEXP
