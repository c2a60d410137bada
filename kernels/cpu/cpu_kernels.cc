// The CPU kernels: OpenBLAS for the matrix products and single passes over memory for the rest,
// which is memory-bound. Every loop runs in a fixed order, so the same input gives bit-identical
// output; OpenBLAS threads the GEMMs, the loops stay on one thread.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/labels.h"
#include "kernels/kernels.h"

namespace slurm_train::kernels {
namespace {

// Calls body with the activation as a compile-time constant, so that the switch in activate()
// is resolved once per call instead of once per element.
template <typename Body>
void with_activation(Activation act, Body&& body) {
  switch (act) {
    case Activation::kRelu: return body(std::integral_constant<Activation, Activation::kRelu>{});
    case Activation::kGelu: return body(std::integral_constant<Activation, Activation::kGelu>{});
    default: return body(std::integral_constant<Activation, Activation::kIdentity>{});
  }
}

class CpuKernels final : public Kernels<float> {
 public:
  const char* name() const override { return "cpu"; }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  void bias_activation_forward(Activation act, int rows, int cols, const float* bias, float* z,
                               float* out) override {
    with_activation(act, [&](auto a) {
      for (std::size_t i = 0, end = std::size_t(rows) * cols; i < end; i += cols) {
        for (int c = 0; c < cols; ++c) {
          const float pre = z[i + c] + bias[c];
          z[i + c] = pre;
          out[i + c] = activate(a.value, pre);
        }
      }
    });
  }

  // Row by row: dbias is one row of accumulators that stays in cache while dz streams by.
  void activation_backward(Activation act, int rows, int cols, const float* z, const float* dout,
                           float* dz, float* dbias) override {
    std::fill(dbias, dbias + cols, 0.0f);
    with_activation(act, [&](auto a) {
      for (std::size_t i = 0, end = std::size_t(rows) * cols; i < end; i += cols) {
        for (int c = 0; c < cols; ++c) {
          const float grad = dout[i + c] * activation_derivative(a.value, z[i + c]);
          dz[i + c] = grad;
          dbias[c] += grad;
        }
      }
    });
  }

  void dropout(int rows, int cols, std::uint64_t seed, std::uint64_t first_row, float p,
               float* x) override {
    const float keep_scale = 1.0f / (1.0f - p);
    for (int r = 0; r < rows; ++r) {
      float* row = x + std::size_t(r) * cols;
      for (int c = 0; c < cols; ++c)
        row[c] = dropout_keeps(seed, first_row + r, c, p) ? row[c] * keep_scale : 0.0f;
    }
  }

  // Per row: one pass for the maximum, one for the exponentials (kept in dlogits), one to turn
  // them into the gradient. With sum(target) = 1 the loss is
  //   log(sum exp(z - max)) - (1 - s) * (z_label - max) - s / classes * sum(z - max).
  LossResult softmax_cross_entropy(int rows, int classes, const float* logits,
                                   const std::int32_t* labels, float label_smoothing,
                                   float grad_scale, float* dlogits) override {
    check_labels(rows, classes, labels);
    const float smooth_target = label_smoothing / static_cast<float>(classes);
    LossResult result;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + std::size_t(r) * classes;
      float* dz = dlogits ? dlogits + std::size_t(r) * classes : nullptr;
      const int label = labels[r];
      const int arg_max = static_cast<int>(std::max_element(z, z + classes) - z);
      const float max = z[arg_max];
      float sum_exp = 0.0f, sum_shifted = 0.0f;
      for (int c = 0; c < classes; ++c) {
        const float shifted = z[c] - max;
        const float e = std::exp(shifted);
        sum_exp += e;
        sum_shifted += shifted;
        if (dz) dz[c] = e;
      }
      const float loss = std::log(sum_exp) - (1.0f - label_smoothing) * (z[label] - max) -
                         smooth_target * sum_shifted;
      result.loss_sum += static_cast<double>(loss);
      result.correct += arg_max == label;
      if (!dz) continue;
      const float inv_sum_exp = 1.0f / sum_exp;
      for (int c = 0; c < classes; ++c) dz[c] = (dz[c] * inv_sum_exp - smooth_target) * grad_scale;
      dz[label] -= (1.0f - label_smoothing) * grad_scale;
    }
    return result;
  }

  void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v,
                    const AdamWParams& h) override {
    const AdamWBiasCorrection bias = adamw_bias_correction(h);
    for (std::size_t i = 0; i < n; ++i)
      adamw_one(param[i], grad[i], m[i], v[i], h, bias.bias1, bias.bias2_sqrt);
  }

  void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer,
                  const SgdParams& h) override {
    for (std::size_t i = 0; i < n; ++i) sgd_one(param[i], grad[i], momentum_buffer[i], h);
  }

  double sum_of_squares(std::size_t n, const float* x) override {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    return sum;
  }

  void scale(std::size_t n, float alpha, float* x) override {
    for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
  }
};

}  // namespace

std::unique_ptr<Kernels<float>> make_cpu_kernels() { return std::make_unique<CpuKernels>(); }

}  // namespace slurm_train::kernels
