#include "kernels/cpu/attention_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/vector_clones.h"
#include "kernels/vector_exp.h"

namespace slurm_train::kernels {
namespace {

// The row passes between the products. Sums and the maximum run in kLanes partial results,
// element i going to lane i % kLanes, combined in lane order: the loops vectorize, and every
// vector width adds in the same order.
constexpr int kLanes = 16;

// Row p[0, T) of scores: p[0, n) becomes its softmax, p[n, T) zero (the causal mask).
ST_VECTOR_CLONES
void causal_softmax_row(int n, int T, float* __restrict p) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = p[i + j] > lane[j] ? p[i + j] : lane[j];
  for (; i < n; ++i) lane[i % kLanes] = p[i] > lane[i % kLanes] ? p[i] : lane[i % kLanes];
  float max = lane[0];
  for (int j = 1; j < kLanes; ++j) max = lane[j] > max ? lane[j] : max;
  for (i = 0; i < n; ++i) p[i] = exp_nonpositive(p[i] - max);
  std::fill(lane, lane + kLanes, 0.0f);
  for (i = 0; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += p[i + j];
  for (; i < n; ++i) lane[i % kLanes] += p[i];
  float sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += lane[j];
  const float inv = 1.0f / sum;
  for (i = 0; i < n; ++i) p[i] *= inv;
  std::fill(p + n, p + T, 0.0f);
}

// Row ds[0, T) of dP becomes dS: p (dP - sum p dP) scale on [0, n), zero above.
ST_VECTOR_CLONES
void softmax_backward_row(int n, int T, const float* __restrict p, float* __restrict ds, float scale) {
  float lane[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += p[i + j] * ds[i + j];
  for (; i < n; ++i) lane[i % kLanes] += p[i] * ds[i];
  float dot = 0;
  for (int j = 0; j < kLanes; ++j) dot += lane[j];
  for (i = 0; i < n; ++i) ds[i] = p[i] * (ds[i] - dot) * scale;
  std::fill(ds + n, ds + T, 0.0f);
}

}  // namespace

void attention_forward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, float* out, float* probs) {
  const int hs = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
      float* p = probs + (static_cast<std::int64_t>(b) * H + h) * T * T;
      // All T x T scores (the causal half is used): fewer instructions than a triangle of dots.
      k.gemm(false, true, T, T, hs, scale, q, ld, q + C, ld, 0.0f, p, T);
      for (int t = 0; t < T; ++t) causal_softmax_row(t + 1, T, p + static_cast<std::int64_t>(t) * T);
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
      for (int t = 0; t < T; ++t)
        softmax_backward_row(t + 1, T, p + static_cast<std::int64_t>(t) * T, ds + static_cast<std::int64_t>(t) * T, scale);
      k.gemm(false, false, T, hs, T, 1.0f, ds, T, q + C, ld, 0.0f, dq, ld);     // dQ = dS K
      k.gemm(true, false, T, hs, T, 1.0f, ds, T, q, ld, 0.0f, dq + C, ld);      // dK = dS^T Q
    }
}

}  // namespace slurm_train::kernels
