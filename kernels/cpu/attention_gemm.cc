#include "kernels/cpu/attention_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace slurm_train::kernels {

void attention_forward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, float* out, float* probs) {
  const int hs = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
      float* p = probs + (static_cast<std::int64_t>(b) * H + h) * T * T;
      // All T x T scores (the causal half is used): fewer instructions than a triangle of dots.
      k.gemm(false, true, T, T, hs, scale, q, ld, q + C, ld, 0.0f, p, T);
      for (int t = 0; t < T; ++t) {
        float* row = p + static_cast<std::int64_t>(t) * T;
        const float max = *std::max_element(row, row + t + 1);
        float sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - max);
          sum += row[t2];
        }
        const float inv = 1.0f / sum;
        for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
        std::fill(row + t + 1, row + T, 0.0f);
      }
      k.gemm(false, false, T, hs, T, 1.0f, p, T, q + 2 * C, ld, 0.0f, out + static_cast<std::int64_t>(b) * T * C + h * hs, C);
    }
}

void attention_backward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, const float* probs,
                             const float* dout, float* dqkv, std::vector<float>& scratch) {
  const int hs = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  scratch.resize(static_cast<std::size_t>(T) * T);
  float* ds = scratch.data();
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
      float* dq = dqkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
      const float* p = probs + (static_cast<std::int64_t>(b) * H + h) * T * T;
      const float* d = dout + static_cast<std::int64_t>(b) * T * C + h * hs;
      k.gemm(false, true, T, T, hs, 1.0f, d, C, q + 2 * C, ld, 0.0f, ds, T);    // dP = dO V^T
      k.gemm(true, false, T, hs, T, 1.0f, p, T, d, C, 0.0f, dq + 2 * C, ld);    // dV = P^T dO
      for (int t = 0; t < T; ++t) {  // dS = P (dP - sum P dP) scale, zero above the diagonal
        const float* prow = p + static_cast<std::int64_t>(t) * T;
        float* row = ds + static_cast<std::int64_t>(t) * T;
        float dot = 0;
        for (int t2 = 0; t2 <= t; ++t2) dot += prow[t2] * row[t2];
        for (int t2 = 0; t2 <= t; ++t2) row[t2] = prow[t2] * (row[t2] - dot) * scale;
        std::fill(row + t + 1, row + T, 0.0f);
      }
      k.gemm(false, false, T, hs, T, 1.0f, ds, T, q + C, ld, 0.0f, dq, ld);     // dQ = dS K
      k.gemm(true, false, T, hs, T, 1.0f, ds, T, q, ld, 0.0f, dq + C, ld);      // dK = dS^T Q
    }
}

}  // namespace slurm_train::kernels
