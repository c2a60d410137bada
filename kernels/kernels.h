// The one interface through which the engine runs its numerics. Implementations:
//   reference (kernels/cpu/reference_kernels.h): plain loops, templated on the element type so
//       that the tests can run the whole model in double precision for gradient checks;
//   cpu (kernels/cpu/cpu_kernels.cc): OpenBLAS cblas_sgemm and fused single-pass loops;
//   cuda (kernels/cuda/cuda_kernels.h, CUDA builds only): cuBLASLt and CUDA kernels on device
//       pointers; the bf16 training step uses kernels/cuda/ directly (train/steps/cuda_mlp_step.h).
// Matrices are row-major and dense unless a leading dimension says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/elementwise.h"

namespace slurm_train::kernels {

// The block of the cpu kernels' sum_of_squares (see there).
inline constexpr std::size_t kSumOfSquaresBlock = std::size_t{1} << 15;

struct LossResult {
  double loss_sum = 0.0;     // sum over rows of the (label-smoothed) cross-entropy
  std::int64_t correct = 0;  // rows whose arg-max logit is the label
};

template <typename T>
class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual const char* name() const = 0;

  // C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(X) is X or X^T as trans_* says.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                    T beta, T* c, int ldc) = 0;

  // z[rows,cols] += bias[cols] (broadcast over rows), then out = dropout(act(z)). z keeps the
  // pre-activation for the backward pass; out may equal z only for kIdentity without dropout.
  virtual void bias_activation_forward(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                                       const DropoutParams& dropout) = 0;

  // dz = dropout(dout) * act'(z), with the forward pass's mask and scale, and dbias[cols] = sum
  // over rows of dz (overwritten, not accumulated). dz may equal dout.
  virtual void activation_backward(Activation act, int rows, int cols, const T* z, const T* dout, T* dz, T* dbias,
                                   const DropoutParams& dropout) = 0;

  // GELU where the backward pass needs nothing of z but GELU's derivative there (a transformer's
  // MLP): z[rows,cols] += bias, out = gelu(z), and z then becomes gelu'(z). Φ(z) and φ(z) serve
  // both here, and gelu_backward only multiplies: the same bits as bias_activation_forward and
  // activation_backward with kGelu, without computing Φ and φ twice. No dropout.
  virtual void bias_gelu_forward(int rows, int cols, const T* bias, T* z, T* out) = 0;

  // dz = dout * derivative (bias_gelu_forward's z), and dbias[cols] = sum over rows of dz
  // (overwritten). dz may equal dout.
  virtual void gelu_backward(int rows, int cols, const T* derivative, const T* dout, T* dz, T* dbias) = 0;

  // Softmax cross-entropy over logits[rows,classes] with integer labels, fused with its
  // gradient: dlogits = (softmax - target) * grad_scale, where target puts 1 - smoothing on the
  // label and smoothing / classes on every class. dlogits may be null (evaluation).
  virtual LossResult softmax_cross_entropy(int rows, int classes, const T* logits, const std::int32_t* labels,
                                           float label_smoothing, T grad_scale, T* dlogits) = 0;

  // One pass over n parameters.
  virtual void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v,
                            const AdamWParams& h) = 0;
  virtual void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer,
                          const SgdParams& h) = 0;

  // Sum of x[i]^2, accumulated in double (the global gradient norm is its square root). The cpu
  // kernels sum blocks of kSumOfSquaresBlock elements, then the blocks' sums in block order from
  // 0.0: a sharded optimizer whose shards start at block boundaries reproduces it bit for bit.
  virtual double sum_of_squares(std::size_t n, const T* x) = 0;

  // x *= alpha.
  virtual void scale(std::size_t n, T alpha, T* x) = 0;
};

// The reference kernels, for float or double.
template <typename T>
std::unique_ptr<Kernels<T>> make_reference_kernels();

// The fast CPU kernels (OpenBLAS + fused loops), float only. Their element-wise loops run on
// `threads` threads; 0: as many as OpenBLAS uses at each call (openblas_set_num_threads).
std::unique_ptr<Kernels<float>> make_cpu_kernels(int threads = 0);

}  // namespace slurm_train::kernels
