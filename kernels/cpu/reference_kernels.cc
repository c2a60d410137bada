// The reference kernels: one loop per step of each definition, no fusion, no tricks.
#include "kernels/cpu/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/labels.h"

namespace slurm_train::kernels {
namespace {

// Offset of (row, col) in a row-major matrix, in size_t so that large matrices cannot overflow.
std::size_t at(int row, int col, int ld) { return std::size_t(row) * ld + col; }

// Dropout in place on x[rows,cols]: zero the units dropout drops, scale the rest by 1/(1-p).
template <typename T>
void apply_dropout(int rows, int cols, const DropoutParams& d, T* x) {
  if (d.p == 0.0f) return;
  const T keep_scale = T(1) / (T(1) - T(d.p));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      T& unit = x[at(r, c, cols)];
      unit = dropout_keeps(d.seed, d.first_row + r, c, d.p) ? unit * keep_scale : T(0);
    }
  }
}

}  // namespace

template <typename T>
void ReferenceKernels<T>::gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
                               const T* b, int ldb, T beta, T* c, int ldc) {
  auto a_at = [&](int i, int p) { return trans_a ? a[at(p, i, lda)] : a[at(i, p, lda)]; };
  auto b_at = [&](int p, int j) { return trans_b ? b[at(j, p, ldb)] : b[at(p, j, ldb)]; };
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      T sum = 0;
      for (int p = 0; p < k; ++p) sum += a_at(i, p) * b_at(p, j);
      T& out = c[at(i, j, ldc)];
      // As BLAS: beta == 0 means C is output only, so old contents (even NaN) are not read.
      out = beta == T(0) ? alpha * sum : alpha * sum + beta * out;
    }
  }
}

template <typename T>
void ReferenceKernels<T>::bias_activation_forward(Activation act, int rows, int cols, const T* bias, T* z, T* out,
                                                  const DropoutParams& dropout) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) z[at(r, c, cols)] += bias[c];
  for (std::size_t i = 0; i < std::size_t(rows) * cols; ++i) out[i] = activate(act, z[i]);
  apply_dropout(rows, cols, dropout, out);
}

template <typename T>
void ReferenceKernels<T>::activation_backward(Activation act, int rows, int cols, const T* z, const T* dout, T* dz,
                                              T* dbias, const DropoutParams& dropout) {
  if (dz != dout) std::copy(dout, dout + std::size_t(rows) * cols, dz);
  // The same mask and scale as forward: d(mask * a / keep)/da = mask / keep.
  apply_dropout(rows, cols, dropout, dz);
  for (std::size_t i = 0; i < std::size_t(rows) * cols; ++i) dz[i] *= activation_derivative(act, z[i]);
  for (int c = 0; c < cols; ++c) {
    T sum = 0;
    for (int r = 0; r < rows; ++r) sum += dz[at(r, c, cols)];
    dbias[c] = sum;
  }
}

template <typename T>
void ReferenceKernels<T>::bias_gelu_forward(int rows, int cols, const T* bias, T* z, T* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const T pre = z[at(r, c, cols)] + bias[c];
      out[at(r, c, cols)] = gelu(pre);
      z[at(r, c, cols)] = gelu_derivative(pre);
    }
}

template <typename T>
void ReferenceKernels<T>::gelu_backward(int rows, int cols, const T* derivative, const T* dout, T* dz, T* dbias) {
  for (std::size_t i = 0; i < std::size_t(rows) * cols; ++i) dz[i] = dout[i] * derivative[i];
  for (int c = 0; c < cols; ++c) {
    T sum = 0;
    for (int r = 0; r < rows; ++r) sum += dz[at(r, c, cols)];
    dbias[c] = sum;
  }
}

template <typename T>
LossResult ReferenceKernels<T>::softmax_cross_entropy(int rows, int classes, const T* logits,
                                                      const std::int32_t* labels, float label_smoothing, T grad_scale,
                                                      T* dlogits) {
  check_labels(rows, classes, labels);
  LossResult result;
  std::vector<T> log_softmax(classes), target(classes);
  for (int r = 0; r < rows; ++r) {
    const T* z = logits + at(r, 0, classes);
    int arg_max = 0;
    for (int c = 1; c < classes; ++c)
      if (z[c] > z[arg_max]) arg_max = c;
    // Subtracting the maximum keeps exp() from overflowing; the log-softmax is unchanged.
    const T max = z[arg_max];
    T sum_exp = 0;
    for (int c = 0; c < classes; ++c) sum_exp += std::exp(z[c] - max);
    const T log_sum_exp = std::log(sum_exp);
    for (int c = 0; c < classes; ++c) {
      log_softmax[c] = z[c] - max - log_sum_exp;
      target[c] = T(label_smoothing) / T(classes);
      if (c == labels[r]) target[c] += T(1) - T(label_smoothing);
    }
    T loss = 0;
    for (int c = 0; c < classes; ++c) loss -= target[c] * log_softmax[c];
    result.loss_sum += static_cast<double>(loss);
    result.correct += arg_max == labels[r];
    if (dlogits == nullptr) continue;
    for (int c = 0; c < classes; ++c) dlogits[at(r, c, classes)] = (std::exp(log_softmax[c]) - target[c]) * grad_scale;
  }
  return result;
}

template <typename T>
void ReferenceKernels<T>::adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v,
                                       const AdamWParams& h) {
  const AdamWBiasCorrection bias = adamw_bias_correction(h);
  for (std::size_t i = 0; i < n; ++i) adamw_one(param[i], grad[i], m[i], v[i], h, bias.bias1, bias.bias2_sqrt);
}

template <typename T>
void ReferenceKernels<T>::sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer,
                                     const SgdParams& h) {
  for (std::size_t i = 0; i < n; ++i) sgd_one(param[i], grad[i], momentum_buffer[i], h);
}

template <typename T>
double ReferenceKernels<T>::sum_of_squares(std::size_t n, const T* x) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum;
}

template <typename T>
void ReferenceKernels<T>::scale(std::size_t n, T alpha, T* x) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

template <typename T>
std::unique_ptr<Kernels<T>> make_reference_kernels() {
  return std::make_unique<ReferenceKernels<T>>();
}

template class ReferenceKernels<float>;
template class ReferenceKernels<double>;
template std::unique_ptr<Kernels<float>> make_reference_kernels<float>();
template std::unique_ptr<Kernels<double>> make_reference_kernels<double>();

}  // namespace slurm_train::kernels
