// The CUDA kernels of the engine other than the matrix products, on device pointers and a
// stream. Their per-element math is kernels/elementwise.h, shared with the CPU kernels, so that
// both paths compute the same formulas (and the CPU tests cover them). Every reduction runs in a
// fixed order on a fixed grid, with no atomics: the same input gives bit-identical output on
// every run and every GPU model.
//
// Types: T is float or __nv_bfloat16 (storage; arithmetic is in float). Parameters, gradients
// and optimizer state are fp32; the loss and the gradient norm are reduced in double.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/elementwise.h"

namespace slurm_train::cuda {

using bf16 = __nv_bfloat16;
using kernels::Activation;
using kernels::AdamWParams;
using kernels::DropoutParams;
using kernels::SgdParams;

// z[rows, cols] += bias (broadcast over rows; none when bias is null, e.g. added by the GEMM's
// epilogue), then out = dropout(act(z)); out may equal z only for kIdentity without dropout.
template <typename T>
void bias_activation_forward(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                             const DropoutParams& dropout, cudaStream_t stream);

// dz = dropout(dout) * act'(z), and dbias[cols] = sum over rows of dz (when not null). dz may
// equal dout.
template <typename T>
void activation_backward(Activation act, int rows, int cols, const T* z, const T* dout, T* dz, float* dbias,
                         const DropoutParams& dropout, cudaStream_t stream);

// z += bias, out = gelu(z), then z = gelu'(z) (kernels::Kernels::bias_gelu_forward).
template <typename T>
void bias_gelu_forward(int rows, int cols, const T* bias, T* z, T* out, cudaStream_t stream);

// dz = dout * derivative, and dbias[cols] = sum over rows of dz (when not null). dz may equal dout.
template <typename T>
void gelu_backward(int rows, int cols, const T* derivative, const T* dout, T* dz, float* dbias, cudaStream_t stream);

// What softmax_cross_entropy leaves in device memory.
struct LossSums {
  double loss_sum;
  long long correct;
  int first_bad_row;  // -1, or the first row whose label is outside [0, classes)
};

// Per-row scratch of softmax_cross_entropy: `rows` floats and `rows` ints.
struct LossScratch {
  float* row_loss;
  int* row_flag;
};

// Softmax cross-entropy over fp32 logits[rows, classes] fused with its gradient (as
// Kernels::softmax_cross_entropy); dlogits may be null. The sums go to *sums (device memory).
template <typename TGrad>
void softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                           float label_smoothing, float grad_scale, TGrad* dlogits, LossScratch scratch, LossSums* sums,
                           cudaStream_t stream);

// Parameter ranges that take no weight decay (the biases), for the one-pass optimizers.
struct DecayFreeRanges {
  static constexpr int kMax = 32;
  int count = 0;
  std::size_t begin[kMax] = {}, end[kMax] = {};
};

// One pass over all n parameters: each gradient is first multiplied by *grad_scale (when not
// null: the clipping factor, left on the device by clip_factor), weight decay is h's except in
// `no_decay`, and when working_copy is not null the updated parameter is also written there in
// bf16 (the copy the bf16 products read).
void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v, const AdamWParams& h,
                  const DecayFreeRanges& no_decay, const float* grad_scale, bf16* working_copy, cudaStream_t stream);
void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer, const SgdParams& h,
                const DecayFreeRanges& no_decay, const float* grad_scale, bf16* working_copy, cudaStream_t stream);

// The squared norm in fixed blocks of kNormBlock elements (the CPU kernels' block,
// kernels::kSumOfSquaresBlock): sums[b] = the sum of x[i]^2 over block b (the last one may be
// shorter), in double, one CUDA block per block. A block's sum does not depend on what precedes
// it, so a shard that starts on a block boundary sums its blocks as the whole vector does
// (train/steps/sharded_optimizer.h).
constexpr std::size_t kNormBlock = std::size_t{1} << 15;
std::size_t norm_blocks(std::size_t n);  // ceil(n / kNormBlock)
void block_sums_of_squares(std::size_t n, const float* x, double* sums, cudaStream_t stream);
// *result = the sum of `count` values, in one fixed order.
void sum_in_order(std::size_t count, const double* values, double* result, cudaStream_t stream);
// *result = sum of x[i]^2 in double: block_sums_of_squares into `partials` (norm_blocks(n)
// doubles), then sum_in_order.
void sum_of_squares(std::size_t n, const float* x, double* partials, double* result, cudaStream_t stream);

// *factor = max_norm / (norm + 1e-6) when max_norm > 0 and norm = sqrt(*sum_of_squares) exceeds
// it, else 1: clip_by_global_norm's factor, without a trip to the host.
void clip_factor(const double* sum_of_squares, float max_norm, float* factor, cudaStream_t stream);

template <typename T>
void scale(std::size_t n, float alpha, T* x, cudaStream_t stream);

// Conversions, rounding to nearest even.
void cast(std::size_t n, const float* in, bf16* out, cudaStream_t stream);
void cast(std::size_t n, const bf16* in, float* out, cudaStream_t stream);

}  // namespace slurm_train::cuda
