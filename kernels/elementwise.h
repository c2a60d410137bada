// Element-wise math of the engine: activations and their derivatives, the optimizer updates of
// one parameter, and the counter-based random numbers of dropout. Written once as
// __host__ __device__ functions, so that the CPU kernels, the CUDA kernels and the tests all use
// the same formulas.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/normal_cdf.h"

#if defined(__CUDACC__)
#define ST_HD __host__ __device__ inline
#else
#define ST_HD inline
#endif

namespace slurm_train::kernels {

enum class Activation : int { kIdentity = 0, kRelu = 1, kGelu = 2 };

// GELU and its derivative in single precision from one Φ and one φ: a kernel that needs both
// (the forward pass keeping the derivative for the backward) computes them once.
struct GeluWithDerivative {
  float value, derivative;
};
ST_HD GeluWithDerivative gelu_with_derivative(float x) {
  const NormalCdfDensity n = normal_cdf_density(x);
  return {x * n.cdf, n.cdf + x * n.density};
}

// GELU with the exact erf form (PyTorch's default, approximate='none'): x Φ(x). In single
// precision Φ comes from normal_cdf.h (no libm call, so that the loops vectorize; within 5e-7 of
// the exact value); in double, the test references, from std::erf.
template <typename T>
ST_HD T gelu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return gelu_with_derivative(x).value;
  } else {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
}

template <typename T>
ST_HD T gelu_derivative(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return gelu_with_derivative(x).derivative;
  } else {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return cdf + x * pdf;
  }
}

// GELU's tanh approximation (PyTorch's approximate='tanh'), which cuBLASLt's GELU epilogues
// compute: the CUDA tests hold those epilogues to it. The model's GELU stays the exact form.
template <typename T>
ST_HD T gelu_tanh(T x) {
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(u));
}

template <typename T>
ST_HD T gelu_tanh_derivative(T x) {
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  const T t = std::tanh(u);
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(0.79788456080286535588) * (T(1) + T(3) * T(0.044715) * x * x);
}

template <typename T>
ST_HD T activate(Activation a, T x) {
  switch (a) {
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kGelu:
      return gelu(x);
    default:
      return x;
  }
}

// d act(z) / dz, from the pre-activation z.
template <typename T>
ST_HD T activation_derivative(Activation a, T z) {
  switch (a) {
    case Activation::kRelu:
      return z > T(0) ? T(1) : T(0);
    case Activation::kGelu:
      return gelu_derivative(z);
    default:
      return T(1);
  }
}

// splitmix64 finaliser: a counter-based generator, so that a dropout mask depends only on
// (seed, global sample, unit) and never on how samples are spread over ranks or threads.
ST_HD std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 24 random bits for unit (row, col).
ST_HD std::uint64_t counter_bits24(std::uint64_t seed, std::uint64_t row, std::uint64_t col) {
  return mix64(seed ^ mix64(row * 0x100000001b3ull + col)) >> 40;
}

// Uniform in [0, 1) from 24 random bits: exact in float.
ST_HD float uniform_from_counter(std::uint64_t seed, std::uint64_t row, std::uint64_t col) {
  return static_cast<float>(counter_bits24(seed, row, col)) * (1.0f / 16777216.0f);
}

// Dropout keeps a unit when its uniform draw is >= p, and scales kept units by 1/(1-p).
ST_HD bool dropout_keeps(std::uint64_t seed, std::uint64_t row, std::uint64_t col, float p) {
  return uniform_from_counter(seed, row, col) >= p;
}

// The same test in integers, for vector loops: bits * 2^-24 >= p exactly when bits >= p * 2^24
// (scaling by a power of two is exact), that is when bits >= ceil(p * 2^24).
ST_HD std::uint64_t dropout_threshold(float p) { return static_cast<std::uint64_t>(std::ceil(p * 16777216.0f)); }

// Dropout of one layer's output in a training step: unit (r, c) of a kernel's rows belongs to
// global row first_row + r of the batch, and is kept when dropout_keeps(seed, first_row + r, c,
// p). The mask depends only on (seed, global row, column): forward and backward, and any split
// of a batch over ranks, see the same one. p in [0, 1); 0 disables dropout.
struct DropoutParams {
  float p = 0.0f;
  std::uint64_t seed = 0, first_row = 0;
};

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  long step = 1;  // 1-based, for bias correction
};

// AdamW's bias corrections at h.step: 1 - beta1^step and sqrt(1 - beta2^step), computed in
// double (as PyTorch does with Python floats) and rounded once, so that every implementation
// passes adamw_one the same two numbers.
struct AdamWBiasCorrection {
  float bias1, bias2_sqrt;
};

ST_HD AdamWBiasCorrection adamw_bias_correction(const AdamWParams& h) {
  const double step = static_cast<double>(h.step);
  return {static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), step)),
          static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), step)))};
}

// Decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW.
ST_HD void adamw_one(float& p, float g, float& m, float& v, const AdamWParams& h, float bias1, float bias2_sqrt) {
  p -= h.lr * h.weight_decay * p;
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * g * g;
  const float denom = std::sqrt(v) / bias2_sqrt + h.eps;
  p -= (h.lr / bias1) * m / denom;
}

struct SgdParams {
  float lr = 0.1f, momentum = 0.9f, weight_decay = 0.0f;
  bool nesterov = false;
};

// As torch.optim.SGD (dampening 0): the first step's buffer is the gradient itself, which
// equals momentum * 0 + g with a zero-initialised buffer.
ST_HD void sgd_one(float& p, float g, float& buf, const SgdParams& h) {
  g += h.weight_decay * p;
  if (h.momentum != 0.0f) {
    buf = h.momentum * buf + g;
    g = h.nesterov ? g + h.momentum * buf : buf;
  }
  p -= h.lr * g;
}

}  // namespace slurm_train::kernels
