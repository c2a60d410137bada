// The transformer's own operations on the CPU, as plain loops (the reference the faster CPU and
// CUDA versions are to be checked against): token and position embedding, LayerNorm, causal
// multi-head self-attention with a numerically stable softmax, and the residual add, each with
// its backward pass. Products and GELU go through kernels::Kernels. Row-major; a row is one
// position of one sequence (B * T rows). Backward passes accumulate into their gradients (+=),
// as a parameter or a residual stream gathers gradient from more than one use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace slurm_train::kernels {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
template <typename T>
void embedding_forward(int B, int T_, int C, const std::int32_t* tokens, const T* wte, const T* wpe, T* out) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const T* e = wte + static_cast<std::int64_t>(tokens[b * T_ + t]) * C;
      const T* p = wpe + static_cast<std::int64_t>(t) * C;
      T* o = out + (static_cast<std::int64_t>(b) * T_ + t) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
}

template <typename T>
void embedding_backward(int B, int T_, int C, const std::int32_t* tokens, const T* dout, T* dwte, T* dwpe) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const T* d = dout + (static_cast<std::int64_t>(b) * T_ + t) * C;
      T* e = dwte + static_cast<std::int64_t>(tokens[b * T_ + t]) * C;
      T* p = dwpe + static_cast<std::int64_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        e[c] += d[c];
        p[c] += d[c];
      }
    }
}

// out = (x - mean) / sqrt(var + eps) * weight + bias over each row of C; mean and rstd (1 / the
// deviation) are kept per row for the backward pass. var is the biased variance, as
// torch.nn.LayerNorm's.
template <typename T>
void layernorm_forward(int rows, int C, const T* x, const T* weight, const T* bias, T* out, T* mean, T* rstd,
                       T eps = T(1e-5)) {
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::int64_t>(r) * C;
    T m = 0;
    for (int c = 0; c < C; ++c) m += xr[c];
    m /= C;
    T v = 0;
    for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= C;
    const T s = T(1) / std::sqrt(v + eps);
    T* o = out + static_cast<std::int64_t>(r) * C;
    for (int c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename T>
void layernorm_backward(int rows, int C, const T* x, const T* weight, const T* mean, const T* rstd, const T* dout,
                        T* dx, T* dweight, T* dbias) {
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::int64_t>(r) * C;
    const T* d = dout + static_cast<std::int64_t>(r) * C;
    T* g = dx + static_cast<std::int64_t>(r) * C;
    // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * weight
    T mean_d = 0, mean_dn = 0;
    for (int c = 0; c < C; ++c) {
      const T norm = (xr[c] - mean[r]) * rstd[r];
      const T dnorm = d[c] * weight[c];
      mean_d += dnorm;
      mean_dn += dnorm * norm;
    }
    mean_d /= C;
    mean_dn /= C;
    for (int c = 0; c < C; ++c) {
      const T norm = (xr[c] - mean[r]) * rstd[r];
      const T dnorm = d[c] * weight[c];
      dweight[c] += d[c] * norm;
      dbias[c] += d[c];
      g[c] += rstd[r] * (dnorm - mean_d - norm * mean_dn);
    }
  }
}

// Causal self-attention of H heads over qkv[B,T,3C] (the query, key and value of each position,
// C = H * head size, heads side by side): out[B,T,C], and the softmax probabilities
// probs[B,H,T,T] (row t holds positions 0..t; the rest stay 0) for the backward pass. Scores are
// scaled by 1/sqrt(head size); the softmax subtracts each row's maximum.
template <typename T>
void attention_forward(int B, int T_, int C, int H, const T* qkv, T* out, T* probs) {
  const int hs = C / H;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  const std::int64_t row = 3 * static_cast<std::int64_t>(C);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T_; ++t) {
        const T* q = qkv + (static_cast<std::int64_t>(b) * T_ + t) * row + h * hs;
        T* p = probs + ((static_cast<std::int64_t>(b) * H + h) * T_ + t) * T_;
        T max = -std::numeric_limits<T>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* k = qkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + C + h * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          p[t2] = s * scale;
          max = std::max(max, p[t2]);
        }
        T sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          p[t2] = std::exp(p[t2] - max);
          sum += p[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) p[t2] /= sum;
        for (int t2 = t + 1; t2 < T_; ++t2) p[t2] = 0;
        T* o = out + (static_cast<std::int64_t>(b) * T_ + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* v = qkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + 2 * C + h * hs;
          for (int i = 0; i < hs; ++i) o[i] += p[t2] * v[i];
        }
      }
}

// dqkv[B,T,3C] += the gradient of attention_forward's out, given dout[B,T,C].
template <typename T>
void attention_backward(int B, int T_, int C, int H, const T* qkv, const T* probs, const T* dout, T* dqkv) {
  const int hs = C / H;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  const std::int64_t row = 3 * static_cast<std::int64_t>(C);
  std::vector<T> dp(static_cast<std::size_t>(T_));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T_; ++t) {
        const T* q = qkv + (static_cast<std::int64_t>(b) * T_ + t) * row + h * hs;
        T* dq = dqkv + (static_cast<std::int64_t>(b) * T_ + t) * row + h * hs;
        const T* p = probs + ((static_cast<std::int64_t>(b) * H + h) * T_ + t) * T_;
        const T* d = dout + (static_cast<std::int64_t>(b) * T_ + t) * C + h * hs;
        // Through the weighted sum of the values: dp = dout . v, dv += p * dout.
        T dot = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* v = qkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + 2 * C + h * hs;
          T* dv = dqkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + 2 * C + h * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) {
            s += d[i] * v[i];
            dv[i] += p[t2] * d[i];
          }
          dp[static_cast<std::size_t>(t2)] = s;
          dot += p[t2] * s;
        }
        // Through the softmax (ds = p * (dp - sum p dp)) and the scaled scores q . k.
        for (int t2 = 0; t2 <= t; ++t2) {
          const T ds = p[t2] * (dp[static_cast<std::size_t>(t2)] - dot) * scale;
          const T* k = qkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + C + h * hs;
          T* dk = dqkv + (static_cast<std::int64_t>(b) * T_ + t2) * row + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
}

// out[r,:] = a[r,:] + bias, for rows r of cols: a residual stream and a bias, before a product
// accumulates into out.
template <typename T>
void residual_bias_forward(int rows, int cols, const T* __restrict a, const T* __restrict bias, T* __restrict out) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r * cols + c] = a[r * cols + c] + bias[c];
}

// out = a + b, elementwise over n.
template <typename T>
void residual_forward(std::int64_t n, const T* a, const T* b, T* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace slurm_train::kernels
