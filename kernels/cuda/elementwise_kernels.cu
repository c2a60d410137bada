// The element-wise, loss, optimizer and reduction kernels (see elementwise_kernels.h).
#include "kernels/cuda/elementwise_kernels.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_kernels_device.cuh"
#include "kernels/kernels.h"

namespace slurm_train::cuda {
namespace {

using namespace elementwise_detail;

// Blocks for a grid-stride loop over n elements: enough to fill any current GPU, no more.
unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>((n + kThreads - 1) / kThreads, 65536)));
}

}  // namespace

template <typename T>
void bias_activation_forward(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                             const DropoutParams& dropout, cudaStream_t stream) {
  const std::size_t total = static_cast<std::size_t>(rows) * cols;
  if (total == 0) return;
  bias_activation_kernel<<<blocks_for(total), kThreads, 0, stream>>>(act, rows, cols, bias, z, out, dropout);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void activation_backward(Activation act, int rows, int cols, const T* z, const T* dout, T* dz, float* dbias,
                         const DropoutParams& dropout, cudaStream_t stream) {
  if (cols == 0) return;
  const dim3 block(32, 8), grid((cols + 31) / 32);
  activation_backward_kernel<<<grid, block, 0, stream>>>(act, rows, cols, z, dout, dz, dbias, dropout);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void bias_gelu_forward(int rows, int cols, const T* bias, T* z, T* out, cudaStream_t stream) {
  const std::size_t total = static_cast<std::size_t>(rows) * cols;
  if (total == 0) return;
  bias_gelu_kernel<<<blocks_for(total), kThreads, 0, stream>>>(rows, cols, bias, z, out);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void gelu_backward(int rows, int cols, const T* derivative, const T* dout, T* dz, float* dbias, cudaStream_t stream) {
  if (cols == 0) return;
  const dim3 block(32, 8), grid((cols + 31) / 32);
  gelu_backward_kernel<<<grid, block, 0, stream>>>(rows, cols, derivative, dout, dz, dbias);
  CUDA_CHECK(cudaGetLastError());
}

template <typename TGrad>
void softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                           float label_smoothing, float grad_scale, TGrad* dlogits, LossScratch scratch, LossSums* sums,
                           cudaStream_t stream) {
  constexpr int kRowsPerBlock = kThreads / 32;
  if (rows > 0) {
    softmax_cross_entropy_kernel<<<(rows + kRowsPerBlock - 1) / kRowsPerBlock, kThreads, 0, stream>>>(
        rows, classes, logits, labels, label_smoothing, grad_scale, dlogits, scratch);
    CUDA_CHECK(cudaGetLastError());
  }
  loss_sums_kernel<<<1, kThreads, 0, stream>>>(rows, scratch, sums);
  CUDA_CHECK(cudaGetLastError());
}

void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v, const AdamWParams& h,
                  const DecayFreeRanges& no_decay, const float* grad_scale, bf16* working_copy, cudaStream_t stream) {
  if (n == 0) return;
  // Bias corrections once, on the host, in double (as every implementation does).
  const kernels::AdamWBiasCorrection bias = kernels::adamw_bias_correction(h);
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, param, grad, m, v, h, no_decay, grad_scale, working_copy,
                                                       bias.bias1, bias.bias2_sqrt);
  CUDA_CHECK(cudaGetLastError());
}

void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer, const SgdParams& h,
                const DecayFreeRanges& no_decay, const float* grad_scale, bf16* working_copy, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, param, grad, momentum_buffer, h, no_decay, grad_scale,
                                                     working_copy);
  CUDA_CHECK(cudaGetLastError());
}

static_assert(kNormBlock == kernels::kSumOfSquaresBlock, "the GPU's norm blocks are the CPU kernels'");

std::size_t norm_blocks(std::size_t n) { return (n + kNormBlock - 1) / kNormBlock; }

void block_sums_of_squares(std::size_t n, const float* x, double* sums, cudaStream_t stream) {
  if (n == 0) return;
  block_sums_of_squares_kernel<<<static_cast<unsigned>(norm_blocks(n)), kThreads, 0, stream>>>(n, x, sums);
  CUDA_CHECK(cudaGetLastError());
}

void sum_in_order(std::size_t count, const double* values, double* result, cudaStream_t stream) {
  // One block whatever count and the GPU: the order of the additions never changes.
  sum_in_order_kernel<<<1, kThreads, 0, stream>>>(count, values, result);
  CUDA_CHECK(cudaGetLastError());
}

void sum_of_squares(std::size_t n, const float* x, double* partials, double* result, cudaStream_t stream) {
  block_sums_of_squares(n, x, partials, stream);
  sum_in_order(norm_blocks(n), partials, result, stream);
}

void clip_factor(const double* sum_of_squares, float max_norm, float* factor, cudaStream_t stream) {
  clip_factor_kernel<<<1, 1, 0, stream>>>(sum_of_squares, max_norm, factor);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void scale(std::size_t n, float alpha, T* x, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, alpha, x);
  CUDA_CHECK(cudaGetLastError());
}

void cast(std::size_t n, const float* in, bf16* out, cudaStream_t stream) {
  if (n == 0) return;
  if (reinterpret_cast<std::uintptr_t>(in) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 8 == 0)
    cast_to_bf16_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(n, in, out);
  else
    cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, in, out);
  CUDA_CHECK(cudaGetLastError());
}

void cast(std::size_t n, const bf16* in, float* out, cudaStream_t stream) {
  if (n == 0) return;
  cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, in, out);
  CUDA_CHECK(cudaGetLastError());
}

template void bias_activation_forward<float>(Activation, int, int, const float*, float*, float*, const DropoutParams&,
                                             cudaStream_t);
template void bias_activation_forward<bf16>(Activation, int, int, const bf16*, bf16*, bf16*, const DropoutParams&,
                                            cudaStream_t);
template void activation_backward<float>(Activation, int, int, const float*, const float*, float*, float*,
                                         const DropoutParams&, cudaStream_t);
template void activation_backward<bf16>(Activation, int, int, const bf16*, const bf16*, bf16*, float*,
                                        const DropoutParams&, cudaStream_t);
template void bias_gelu_forward<float>(int, int, const float*, float*, float*, cudaStream_t);
template void gelu_backward<float>(int, int, const float*, const float*, float*, float*, cudaStream_t);
template void softmax_cross_entropy<float>(int, int, const float*, const std::int32_t*, float, float, float*,
                                           LossScratch, LossSums*, cudaStream_t);
template void softmax_cross_entropy<bf16>(int, int, const float*, const std::int32_t*, float, float, bf16*, LossScratch,
                                          LossSums*, cudaStream_t);
template void scale<float>(std::size_t, float, float*, cudaStream_t);
template void scale<bf16>(std::size_t, float, bf16*, cudaStream_t);

}  // namespace slurm_train::cuda
