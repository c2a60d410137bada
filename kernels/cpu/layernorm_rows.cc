#include "kernels/cpu/layernorm_rows.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vector_clones.h"

namespace slurm_train::kernels {
namespace {

constexpr int kLanes = 16;

// sum of f(c) over c in [0, C): lane c % kLanes, lanes added in order.
template <typename F>
[[gnu::always_inline]] inline float lane_sum(int C, F f) {
  float lane[kLanes] = {};
  int c = 0;
  for (; c + kLanes <= C; c += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += f(c + j);
  for (; c < C; ++c) lane[c % kLanes] += f(c);
  float sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += lane[j];
  return sum;
}

}  // namespace

ST_VECTOR_CLONES
void layernorm_rows_forward(int rows, int C, const float* x, const float* __restrict weight,
                            const float* __restrict bias, float* out, float* __restrict mean, float* __restrict rstd,
                            float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* __restrict xr = x + static_cast<std::int64_t>(r) * C;
    float* __restrict o = out + static_cast<std::int64_t>(r) * C;
    const float m = lane_sum(C, [&](int c) { return xr[c]; }) / static_cast<float>(C);
    const float v = lane_sum(C, [&](int c) { return (xr[c] - m) * (xr[c] - m); }) / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(v + eps);
    for (int c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

ST_VECTOR_CLONES
void layernorm_rows_backward(int rows, int C, const float* x, const float* __restrict weight,
                             const float* __restrict mean, const float* __restrict rstd, const float* dout, float* dx,
                             float* __restrict dweight, float* __restrict dbias) {
  for (int r = 0; r < rows; ++r) {
    const float* __restrict xr = x + static_cast<std::int64_t>(r) * C;
    const float* __restrict d = dout + static_cast<std::int64_t>(r) * C;
    float* __restrict g = dx + static_cast<std::int64_t>(r) * C;
    const float m = mean[r], s = rstd[r];
    // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * weight
    const float mean_d = lane_sum(C, [&](int c) { return d[c] * weight[c]; }) / static_cast<float>(C);
    const float mean_dn =
        lane_sum(C, [&](int c) { return d[c] * weight[c] * ((xr[c] - m) * s); }) / static_cast<float>(C);
    for (int c = 0; c < C; ++c) {
      const float norm = (xr[c] - m) * s;
      const float dnorm = d[c] * weight[c];
      dweight[c] += d[c] * norm;
      dbias[c] += d[c];
      g[c] += s * (dnorm - mean_d - norm * mean_dn);
    }
  }
}

}  // namespace slurm_train::kernels
