// exp_nonpositive, the softmax's and the normal density's exp, against double-precision libm.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "kernels/vector_exp.h"

using slurm_train::kernels::exp_nonpositive;

TEST_CASE("exp_nonpositive: within 2e-7 of double-precision exp over [-87, 0]") {
  double worst = 0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = static_cast<float>(-i * 1e-4);
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_nonpositive(x) - want) / want);
  }
  // Near 0, where the softmax's largest terms are.
  for (float x = -1e-3f; x < 0; x = std::nextafter(x, 0.0f) + 1e-9f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_nonpositive(x) - want) / want);
  }
  MESSAGE("worst relative error " << worst);
  CHECK(worst < 2e-7);
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  CHECK(exp_nonpositive(-88.0f) == 0.0f);  // below FLT_MIN: no subnormals
  CHECK(exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(exp_nonpositive(-1.0f, 1e-3f) == doctest::Approx(std::exp(-0.999)).epsilon(2e-7));
}
