// The vectorized LayerNorm against the plain loops of kernels/cpu/transformer_ops.h in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/layernorm_rows.h"
#include "kernels/cpu/transformer_ops.h"
#include "kernels/elementwise.h"

using namespace slurm_train;

namespace {

std::vector<float> values(std::size_t n, std::uint64_t seed, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = offset + static_cast<float>(kernels::mix64(seed * 1000003 + i) % 20001) / 10000.0f - 1.0f;
  return v;
}

double worst_relative(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0, scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / scale);
  return worst;
}

}  // namespace

TEST_CASE("layernorm_rows: forward and backward match the reference loops, for widths around the lanes") {
  for (const int C : {1, 7, 16, 33, 128, 770}) {
    CAPTURE(C);
    const int rows = 5;
    const std::size_t n = static_cast<std::size_t>(rows) * C;
    // An offset far from zero: the two-pass variance must not cancel.
    const auto x = values(n, 1, 30.0f), w = values(C, 2, 1.0f), b = values(C, 3, 0.0f), dout = values(n, 4, 0.0f);
    std::vector<float> out(n), mean(rows), rstd(rows), dx(n, 0.5f), dw(C, 0.25f), db(C, -0.25f);
    kernels::layernorm_rows_forward(rows, C, x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data());
    kernels::layernorm_rows_backward(rows, C, x.data(), w.data(), mean.data(), rstd.data(), dout.data(), dx.data(),
                                     dw.data(), db.data());

    const std::vector<double> x64(x.begin(), x.end()), w64(w.begin(), w.end()), b64(b.begin(), b.end()),
        dout64(dout.begin(), dout.end());
    std::vector<double> out64(n), mean64(rows), rstd64(rows), dx64(n, 0.5), dw64(C, 0.25), db64(C, -0.25);
    kernels::layernorm_forward(rows, C, x64.data(), w64.data(), b64.data(), out64.data(), mean64.data(), rstd64.data());
    kernels::layernorm_backward(rows, C, x64.data(), w64.data(), mean64.data(), rstd64.data(), dout64.data(),
                                dx64.data(), dw64.data(), db64.data());
    // x - mean in float: the mean's rounding (about 30 * 6e-8) against deviations of about 0.6.
    CHECK(worst_relative(out, out64) < 1e-5);
    CHECK(worst_relative(mean, mean64) < 1e-6);
    CHECK(worst_relative(rstd, rstd64) < 1e-4);  // 1/sqrt of a variance summed from values near 30
    CHECK(worst_relative(dx, dx64) < 1e-4);
    CHECK(worst_relative(dw, dw64) < 1e-5);
    CHECK(worst_relative(db, db64) < 1e-6);
  }
}
