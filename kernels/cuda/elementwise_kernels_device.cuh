// The device code of elementwise_kernels.h, included by elementwise_kernels.cu and by
// test/unit/elementwise_kernels_emulated_test.cc, which runs it on the CPU emulation of CUDA's
// execution model (test/unit/cuda_emulation.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/float_convert.cuh"

namespace slurm_train::cuda::elementwise_detail {

using kernels::activate;
using kernels::activation_derivative;
using kernels::dropout_keeps;

constexpr int kThreads = 256;

// The dropout factor of unit (row, col): 0 when dropped, 1/(1-p) when kept, 1 without dropout.
__device__ inline float dropout_factor(const DropoutParams& d, int row, int col) {
  if (d.p == 0.0f) return 1.0f;
  return dropout_keeps(d.seed, d.first_row + static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(col), d.p)
             ? 1.0f / (1.0f - d.p)
             : 0.0f;
}

template <typename T>
__global__ void bias_activation_kernel(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                                       DropoutParams d) {
  const std::size_t total = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(i / cols), col = static_cast<int>(i % cols);
    float pre = to_float(z[i]);
    if (bias) {
      pre += to_float(bias[col]);
      z[i] = from_float<T>(pre);
      pre = to_float(z[i]);  // the stored (rounded) pre-activation, as backward will read it
    }
    const float a = activate(act, pre);
    out[i] = from_float<T>(d.p == 0.0f ? a : a * dropout_factor(d, row, col));
  }
}

// The backward kernels' blocks are 32 columns x 8 row groups, each thread having summed its column
// over every 8th row: the 8 partial sums of a column are added in a fixed order into dbias[col]
// (when dbias is not null). Every thread of the block calls it.
__device__ inline void column_sum_of_row_groups(float sum, int col, int cols, float* dbias) {
  __shared__ float partial[8][33];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols && dbias) {
    float total = 0.0f;
    for (int g = 0; g < 8; ++g) total += partial[g][threadIdx.x];
    dbias[col] = total;
  }
}

// Block (32 columns, 8 row groups): each thread walks its column over every 8th row.
template <typename T>
__global__ void activation_backward_kernel(Activation act, int rows, int cols, const T* z, const T* dout, T* dz,
                                           float* dbias, DropoutParams d) {
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int row = threadIdx.y; row < rows; row += 8) {
      const std::size_t i = static_cast<std::size_t>(row) * cols + col;
      const float kept = to_float(dout[i]) * dropout_factor(d, row, col);
      const float grad = kept * activation_derivative(act, to_float(z[i]));
      dz[i] = from_float<T>(grad);
      sum += grad;
    }
  }
  column_sum_of_row_groups(sum, col, cols, dbias);
}

// As bias_activation_kernel with GELU, a bias and no dropout; z then holds GELU's derivative at
// the stored pre-activation.
template <typename T>
__global__ void bias_gelu_kernel(int rows, int cols, const T* bias, T* z, T* out) {
  const std::size_t total = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float pre = to_float(from_float<T>(to_float(z[i]) + to_float(bias[i % cols])));
    const kernels::GeluWithDerivative g = kernels::gelu_with_derivative(pre);
    out[i] = from_float<T>(g.value);
    z[i] = from_float<T>(g.derivative);
  }
}

// As activation_backward_kernel without dropout, the derivative given.
template <typename T>
__global__ void gelu_backward_kernel(int rows, int cols, const T* derivative, const T* dout, T* dz, float* dbias) {
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int row = threadIdx.y; row < rows; row += 8) {
      const std::size_t i = static_cast<std::size_t>(row) * cols + col;
      const float grad = to_float(dout[i]) * to_float(derivative[i]);
      dz[i] = from_float<T>(grad);
      sum += grad;
    }
  }
  column_sum_of_row_groups(sum, col, cols, dbias);
}

// One warp a row. Lane-strided partial results are combined by butterfly shuffles, a fixed
// order. The arg-max keeps the lowest index among equal maxima, as std::max_element does.
template <typename TGrad>
__global__ void softmax_cross_entropy_kernel(int rows, int classes, const float* logits, const std::int32_t* labels,
                                             float smoothing, float grad_scale, TGrad* dlogits, LossScratch scratch) {
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * warps + threadIdx.x / 32;
  if (row >= rows) return;
  const float* z = logits + static_cast<std::size_t>(row) * classes;
  const int label = labels[row];
  if (label < 0 || label >= classes) {
    if (lane == 0) scratch.row_loss[row] = 0.0f, scratch.row_flag[row] = -1;
    return;
  }
  float max = -INFINITY;
  int arg_max = classes;
  for (int c = lane; c < classes; c += 32)
    if (z[c] > max) max = z[c], arg_max = c;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, max, offset);
    const int other_arg = __shfl_xor_sync(0xffffffffu, arg_max, offset);
    if (other > max || (other == max && other_arg < arg_max)) max = other, arg_max = other_arg;
  }
  float sum_exp = 0.0f, sum_shifted = 0.0f;
  for (int c = lane; c < classes; c += 32) {
    const float shifted = z[c] - max;
    sum_exp += expf(shifted);
    sum_shifted += shifted;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum_exp += __shfl_xor_sync(0xffffffffu, sum_exp, offset);
    sum_shifted += __shfl_xor_sync(0xffffffffu, sum_shifted, offset);
  }
  const float smooth_target = smoothing / static_cast<float>(classes);
  // With sum(target) = 1: log(sum exp(z - max)) - (1 - s)(z_label - max) - s/C sum(z - max).
  if (lane == 0) {
    scratch.row_loss[row] = logf(sum_exp) - (1.0f - smoothing) * (z[label] - max) - smooth_target * sum_shifted;
    scratch.row_flag[row] = arg_max == label ? 1 : 0;
  }
  if (!dlogits) return;
  const float inv_sum_exp = 1.0f / sum_exp;
  TGrad* dz = dlogits + static_cast<std::size_t>(row) * classes;
  for (int c = lane; c < classes; c += 32) {
    float g = (expf(z[c] - max) * inv_sum_exp - smooth_target) * grad_scale;
    if (c == label) g -= (1.0f - smoothing) * grad_scale;
    dz[c] = from_float<TGrad>(g);
  }
}

// Tree sum of kThreads doubles in shared memory (fixed order).
__device__ double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void loss_sums_kernel(int rows, LossScratch scratch, LossSums* sums) {
  __shared__ double shared[kThreads];
  __shared__ int first_bad;
  if (threadIdx.x == 0) first_bad = rows;
  __syncthreads();
  double loss = 0.0, correct = 0.0;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += scratch.row_loss[r];
    if (scratch.row_flag[r] > 0) correct += 1.0;
    if (scratch.row_flag[r] < 0) atomicMin(&first_bad, r);  // min is order-independent
  }
  const double loss_total = block_sum(loss, shared);
  __syncthreads();
  const double correct_total = block_sum(correct, shared);
  if (threadIdx.x == 0) {
    sums->loss_sum = loss_total;
    sums->correct = static_cast<long long>(correct_total);
    sums->first_bad_row = first_bad == rows ? -1 : first_bad;
  }
}

__device__ inline bool decays(const DecayFreeRanges& r, std::size_t i) {
  for (int j = 0; j < r.count; ++j)
    if (i >= r.begin[j] && i < r.end[j]) return false;
  return true;
}

__global__ void adamw_kernel(std::size_t n, float* param, const float* grad, float* m, float* v, AdamWParams h,
                             DecayFreeRanges no_decay, const float* grad_scale, bf16* working_copy, float bias1,
                             float bias2_sqrt) {
  const float factor = grad_scale ? *grad_scale : 1.0f;
  const float decay = h.weight_decay;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    h.weight_decay = decays(no_decay, i) ? decay : 0.0f;
    float p = param[i], mi = m[i], vi = v[i];
    kernels::adamw_one(p, grad[i] * factor, mi, vi, h, bias1, bias2_sqrt);
    param[i] = p, m[i] = mi, v[i] = vi;
    if (working_copy) working_copy[i] = __float2bfloat16_rn(p);
  }
}

__global__ void sgd_kernel(std::size_t n, float* param, const float* grad, float* buffer, SgdParams h,
                           DecayFreeRanges no_decay, const float* grad_scale, bf16* working_copy) {
  const float factor = grad_scale ? *grad_scale : 1.0f;
  const float decay = h.weight_decay;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    h.weight_decay = decays(no_decay, i) ? decay : 0.0f;
    float p = param[i], b = buffer[i];
    kernels::sgd_one(p, grad[i] * factor, b, h);
    param[i] = p, buffer[i] = b;
    if (working_copy) working_copy[i] = __float2bfloat16_rn(p);
  }
}

__global__ void block_sums_of_squares_kernel(std::size_t n, const float* x, double* sums) {
  __shared__ double shared[kThreads];
  const std::size_t begin = blockIdx.x * kNormBlock, end = n < begin + kNormBlock ? n : begin + kNormBlock;
  double sum = 0.0;
  for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) sum += static_cast<double>(x[i]) * x[i];
  const double total = block_sum(sum, shared);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

__global__ void sum_in_order_kernel(std::size_t count, const double* values, double* result) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) sum += values[i];
  const double total = block_sum(sum, shared);
  if (threadIdx.x == 0) *result = total;
}

__global__ void clip_factor_kernel(const double* sum_of_squares, float max_norm, float* factor) {
  const double norm = sqrt(*sum_of_squares);
  *factor = max_norm > 0.0f && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

template <typename T>
__global__ void scale_kernel(std::size_t n, float alpha, T* x) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) * alpha);
}

template <typename From, typename To>
__global__ void cast_kernel(std::size_t n, const From* in, To* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = from_float<To>(to_float(in[i]));
}

// fp32 to bf16 four values a thread at a time (one 16-byte load, one 8-byte store): in 16-byte
// and out 8-byte aligned; the last n % 4 one at a time. The same bits as cast_kernel.
__global__ void cast_to_bf16_x4_kernel(std::size_t n, const float* in, bf16* out) {
  const std::size_t quads = n / 4, stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (std::size_t q = first; q < quads; q += stride) {
    float x[4];
    load4(in + 4 * q, x);
    store4(out + 4 * q, x);
  }
  for (std::size_t i = quads * 4 + first; i < n; i += stride) out[i] = from_float<bf16>(in[i]);
}

}  // namespace slurm_train::cuda::elementwise_detail
