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

// Queries in blocks of kBlock rows: block [r0, r1) attends to keys [0, r1) only, so the products
// skip the scores above the diagonal's blocks (a quarter of them at T = 128, nearly half at 1024)
// while each stays large enough for the BLAS. The entries they skip are zeros that the full
// products would have added: the results are the same.
constexpr int kBlock = 64;

std::int64_t attention_scores_computed(int T) {
  std::int64_t n = 0;
  for (int r0 = 0; r0 < T; r0 += kBlock) {
    const int r1 = std::min(T, r0 + kBlock);
    n += static_cast<std::int64_t>(r1 - r0) * r1;
  }
  return n;
}

void attention_forward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, float* out, float* probs) {
  const int hs = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
      float* p = probs + (static_cast<std::int64_t>(b) * H + h) * T * T;
      float* o = out + static_cast<std::int64_t>(b) * T * C + h * hs;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock);
        float* pr = p + static_cast<std::int64_t>(r0) * T;
        // The block's scores against keys [0, r1): fewer instructions than a triangle of dots.
        k.gemm(false, true, r1 - r0, r1, hs, scale, q + static_cast<std::int64_t>(r0) * ld, ld, q + C, ld, 0.0f, pr, T);
        for (int t = r0; t < r1; ++t) causal_softmax_row(t + 1, T, p + static_cast<std::int64_t>(t) * T);
        k.gemm(false, false, r1 - r0, hs, r1, 1.0f, pr, T, q + 2 * C, ld, 0.0f, o + static_cast<std::int64_t>(r0) * C,
               C);
      }
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
      // Query rows [r0, r1): dP = dO V^T and dQ = dS K over keys [0, r1).
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock);
        float* dsr = ds + static_cast<std::int64_t>(r0) * T;
        k.gemm(false, true, r1 - r0, r1, hs, 1.0f, d + static_cast<std::int64_t>(r0) * C, C, q + 2 * C, ld, 0.0f, dsr,
               T);
        for (int t = r0; t < r1; ++t)
          softmax_backward_row(t + 1, T, p + static_cast<std::int64_t>(t) * T, ds + static_cast<std::int64_t>(t) * T,
                               scale);
        k.gemm(false, false, r1 - r0, hs, r1, 1.0f, dsr, T, q + C, ld, 0.0f, dq + static_cast<std::int64_t>(r0) * ld,
               ld);
      }
      // Key rows [c0, c1): dV = P^T dO and dK = dS^T Q over queries [c0, T).
      for (int c0 = 0; c0 < T; c0 += kBlock) {
        const int c1 = std::min(T, c0 + kBlock);
        const std::int64_t corner = static_cast<std::int64_t>(c0) * T + c0;
        k.gemm(true, false, c1 - c0, hs, T - c0, 1.0f, p + corner, T, d + static_cast<std::int64_t>(c0) * C, C, 0.0f,
               dq + 2 * C + static_cast<std::int64_t>(c0) * ld, ld);
        k.gemm(true, false, c1 - c0, hs, T - c0, 1.0f, ds + corner, T, q + static_cast<std::int64_t>(c0) * ld, ld, 0.0f,
               dq + C + static_cast<std::int64_t>(c0) * ld, ld);
      }
    }
}

}  // namespace slurm_train::kernels
