// The reference kernels: plain loops that follow each definition in kernels/kernels.h literally,
// templated on the element type. They are the yardstick for the CPU and CUDA kernels, and in
// double precision the basis of the engine's gradient check.
#pragma once

#include "kernels/kernels.h"

namespace slurm_train::kernels {

template <typename T>
class ReferenceKernels final : public Kernels<T> {
 public:
  const char* name() const override { return "reference"; }
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
            T* c, int ldc) override;
  void bias_activation_forward(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                               const DropoutParams& dropout) override;
  void activation_backward(Activation act, int rows, int cols, const T* z, const T* dout, T* dz, T* dbias,
                           const DropoutParams& dropout) override;
  void bias_gelu_forward(int rows, int cols, const T* bias, T* z, T* out) override;
  void gelu_backward(int rows, int cols, const T* derivative, const T* dout, T* dz, T* dbias) override;
  LossResult softmax_cross_entropy(int rows, int classes, const T* logits, const std::int32_t* labels,
                                   float label_smoothing, T grad_scale, T* dlogits) override;
  void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v, const AdamWParams& h) override;
  void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer, const SgdParams& h) override;
  double sum_of_squares(std::size_t n, const T* x) override;
  void scale(std::size_t n, T alpha, T* x) override;
};

extern template class ReferenceKernels<float>;
extern template class ReferenceKernels<double>;

}  // namespace slurm_train::kernels
