// The single-precision normal CDF and density behind GELU, against double-precision libm.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "kernels/elementwise.h"
#include "kernels/normal_cdf.h"

using namespace slurm_train::kernels;

TEST_CASE(
    "normal_cdf_density: within a few ulp of double-precision erfc and exp over every float step of 1e-4 in [-13, "
    "13]") {
  double worst_cdf_rel = 0, worst_cdf_abs = 0, worst_density_rel = 0;
  for (int i = -130000; i <= 130000; ++i) {
    const float x = static_cast<float>(i * 1e-4);
    const double xd = x;
    const double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double density = std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    const NormalCdfDensity n = normal_cdf_density(x);
    worst_cdf_abs = std::max(worst_cdf_abs, std::abs(n.cdf - cdf));
    if (cdf >= FLT_MIN) worst_cdf_rel = std::max(worst_cdf_rel, std::abs(n.cdf - cdf) / cdf);
    if (density >= FLT_MIN) worst_density_rel = std::max(worst_density_rel, std::abs(n.density - density) / density);
  }
  MESSAGE("worst relative error of the cdf " << worst_cdf_rel << ", absolute " << worst_cdf_abs
                                             << "; of the density, relative " << worst_density_rel);
  CHECK(worst_cdf_rel < 5e-7);
  CHECK(worst_cdf_abs < 2e-7);
  CHECK(worst_density_rel < 3e-7);
}

TEST_CASE("normal_cdf_density: the ends and non-finite arguments") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(normal_cdf_density(inf).cdf == 1.0f);
  CHECK(normal_cdf_density(inf).density == 0.0f);
  CHECK(normal_cdf_density(-inf).cdf == 0.0f);
  CHECK(normal_cdf_density(1e30f).cdf == 1.0f);
  CHECK(normal_cdf_density(-1e30f).cdf == 0.0f);
  CHECK(normal_cdf_density(-14.0f).cdf == 0.0f);  // 8e-45 would be subnormal: flushed
  CHECK(normal_cdf_density(0.0f).cdf == doctest::Approx(0.5).epsilon(1e-7));
  CHECK(std::isnan(normal_cdf_density(std::numeric_limits<float>::quiet_NaN()).cdf));
  // GELU in single precision through it, against the double-precision formula.
  for (const float x : {-6.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 3.0f}) {
    CAPTURE(x);
    CHECK(gelu(x) == doctest::Approx(gelu(static_cast<double>(x))).epsilon(1e-6).scale(1e-7));
    CHECK(gelu_derivative(x) == doctest::Approx(gelu_derivative(static_cast<double>(x))).epsilon(1e-6).scale(1e-7));
  }
}
