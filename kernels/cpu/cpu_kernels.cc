// The CPU kernels: OpenBLAS for the matrix products and single passes over memory for the rest,
// which is memory-bound. The passes run on the rank's threads too (as many as OpenBLAS has, in a
// ThreadPool of this file's own), in fixed pieces whose results depend on the piece only, so the
// same input gives bit-identical output for any number of threads:
//   - element-wise loops (bias + activation + dropout, the optimizers, scale): any split works;
//   - activation_backward sums dbias over fixed blocks of rows, then the blocks' sums in order;
//   - sum_of_squares sums fixed blocks of elements, then the blocks' sums in block order.
//
// The element-wise loops are written so that GCC vectorizes them (restrict pointers, loop
// invariants in locals, fixed-width partial sums), and each is compiled for AVX-512, AVX2 and
// baseline x86-64, the loader picking the widest the CPU has (function multiversioning). The
// Makefile compiles this file with -O3 -ffp-contract=off: no fused multiply-add, so every clone
// rounds exactly as the reference kernels do.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/column_sums.h"
#include "kernels/cpu/labels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vector_clones.h"
#include "kernels/kernels.h"

namespace slurm_train::kernels {
namespace {

// keep[c] is all ones when dropout keeps unit (row, c), zero when it drops it: a mask that the
// float loops select with. The 64-bit hash runs in its own loop, so that both loops vectorize.
[[gnu::always_inline]] inline void dropout_keep_mask(int cols, std::uint64_t seed, std::uint64_t row,
                                                     std::uint64_t threshold, std::uint32_t* __restrict keep) {
  for (int c = 0; c < cols; ++c)
    keep[c] = counter_bits24(seed, row, static_cast<std::uint64_t>(c)) >= threshold ? ~0u : 0u;
}

template <Activation A>
[[gnu::always_inline]] inline void bias_activation_rows(int rows, int cols, const float* __restrict bias, float* z,
                                                        float* out, const DropoutParams& d,
                                                        std::uint32_t* __restrict keep) {
  const float keep_scale = 1.0f / (1.0f - d.p);
  const std::uint64_t threshold = dropout_threshold(d.p);
  for (int r = 0; r < rows; ++r) {
    float* zr = z + std::size_t(r) * cols;
    float* outr = out + std::size_t(r) * cols;
    if (d.p == 0.0f) {
      for (int c = 0; c < cols; ++c) {
        const float pre = zr[c] + bias[c];
        zr[c] = pre;
        outr[c] = activate(A, pre);
      }
      continue;
    }
    dropout_keep_mask(cols, d.seed, d.first_row + r, threshold, keep);
    for (int c = 0; c < cols; ++c) {
      const float pre = zr[c] + bias[c];
      zr[c] = pre;
      const float a = activate(A, pre);
      outr[c] = keep[c] ? a * keep_scale : 0.0f;
    }
  }
}

// Row by row: dbias is one row of accumulators that stays in cache while dz streams by.
template <Activation A>
[[gnu::always_inline]] inline void activation_backward_rows(int rows, int cols, const float* z, const float* dout,
                                                            float* dz, float* __restrict dbias, const DropoutParams& d,
                                                            std::uint32_t* __restrict keep) {
  const float keep_scale = 1.0f / (1.0f - d.p);
  const std::uint64_t threshold = dropout_threshold(d.p);
  std::fill(dbias, dbias + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* zr = z + std::size_t(r) * cols;
    const float* doutr = dout + std::size_t(r) * cols;
    float* dzr = dz + std::size_t(r) * cols;
    if (d.p == 0.0f) {
      for (int c = 0; c < cols; ++c) {
        const float grad = doutr[c] * activation_derivative(A, zr[c]);
        dzr[c] = grad;
        dbias[c] += grad;
      }
      continue;
    }
    // The same mask and scale as forward: d(mask * a / keep)/da = mask / keep.
    dropout_keep_mask(cols, d.seed, d.first_row + r, threshold, keep);
    for (int c = 0; c < cols; ++c) {
      const float kept = keep[c] ? doutr[c] * keep_scale : 0.0f;
      const float grad = kept * activation_derivative(A, zr[c]);
      dzr[c] = grad;
      dbias[c] += grad;
    }
  }
}

ST_VECTOR_CLONES
void bias_activation_loop(Activation act, int rows, int cols, const float* bias, float* z, float* out,
                          const DropoutParams& d, std::uint32_t* keep) {
  switch (act) {
    case Activation::kRelu:
      return bias_activation_rows<Activation::kRelu>(rows, cols, bias, z, out, d, keep);
    case Activation::kGelu:
      return bias_activation_rows<Activation::kGelu>(rows, cols, bias, z, out, d, keep);
    default:
      return bias_activation_rows<Activation::kIdentity>(rows, cols, bias, z, out, d, keep);
  }
}

ST_VECTOR_CLONES
void activation_backward_loop(Activation act, int rows, int cols, const float* z, const float* dout, float* dz,
                              float* dbias, const DropoutParams& d, std::uint32_t* keep) {
  switch (act) {
    case Activation::kRelu:
      return activation_backward_rows<Activation::kRelu>(rows, cols, z, dout, dz, dbias, d, keep);
    case Activation::kGelu:
      return activation_backward_rows<Activation::kGelu>(rows, cols, z, dout, dz, dbias, d, keep);
    default:
      return activation_backward_rows<Activation::kIdentity>(rows, cols, z, dout, dz, dbias, d, keep);
  }
}

// As bias_activation_rows with GELU and no dropout, and z then holds GELU's derivative: one
// normal_cdf_density per element where the pair of passes computed it twice.
ST_VECTOR_CLONES
void bias_gelu_loop(int rows, int cols, const float* __restrict bias, float* __restrict z, float* __restrict out) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + std::size_t(r) * cols;
    float* __restrict outr = out + std::size_t(r) * cols;
    for (int c = 0; c < cols; ++c) {
      const float pre = zr[c] + bias[c];
      const GeluWithDerivative g = gelu_with_derivative(pre);
      outr[c] = g.value;
      zr[c] = g.derivative;
    }
  }
}

// As activation_backward_rows without dropout, the derivative given.
ST_VECTOR_CLONES
void gelu_backward_loop(int rows, int cols, const float* derivative, const float* dout, float* dz,
                        float* __restrict dbias) {
  std::fill(dbias, dbias + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* der = derivative + std::size_t(r) * cols;
    const float* doutr = dout + std::size_t(r) * cols;
    float* dzr = dz + std::size_t(r) * cols;
    for (int c = 0; c < cols; ++c) {
      const float grad = doutr[c] * der[c];
      dzr[c] = grad;
      dbias[c] += grad;
    }
  }
}

// dbias = the blocks' partial sums, added in block order (each column's sum in a fixed order).
void add_block_sums(int blocks, int cols, const float* partial, float* dbias) {
  std::copy(partial, partial + cols, dbias);
  add_column_sums(blocks - 1, cols, partial + cols, dbias);
}

ST_VECTOR_CLONES
void adamw_loop(std::size_t n, float* __restrict param, const float* __restrict grad, float* __restrict m,
                float* __restrict v, AdamWParams h) {
  const AdamWBiasCorrection bias = adamw_bias_correction(h);
  for (std::size_t i = 0; i < n; ++i) adamw_one(param[i], grad[i], m[i], v[i], h, bias.bias1, bias.bias2_sqrt);
}

ST_VECTOR_CLONES
void sgd_loop(std::size_t n, float* __restrict param, const float* __restrict grad, float* __restrict momentum_buffer,
              SgdParams h) {
  for (std::size_t i = 0; i < n; ++i) sgd_one(param[i], grad[i], momentum_buffer[i], h);
}

// 32 partial sums, element i going to sum i % 32, added up in a fixed order at the end: the same
// result for every vector width, and enough independent chains to keep the adds busy (four
// AVX-512 registers of doubles; eight lanes measured 26 ms for 50 M floats here, 32 lanes 22).
// One block of sum_of_squares (see kSumBlock, a multiple of 32).
ST_VECTOR_CLONES
double sum_of_squares_loop(std::size_t n, const float* __restrict x) {
  constexpr std::size_t kLanes = 32;
  double partial[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) partial[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (; i < n; ++i) partial[i % kLanes] += static_cast<double>(x[i]) * x[i];
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

ST_VECTOR_CLONES
void scale_loop(std::size_t n, float alpha, float* __restrict x) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

// The pieces the loops are cut into: about 128 KiB of floats each, enough to amortise a piece's
// dispatch (tens of ns) and small enough that two threads share the work evenly.
constexpr std::size_t kPiece = std::size_t{1} << 15;
// sum_of_squares sums blocks of this many elements (a multiple of its eight lanes), then the
// blocks' sums in block order: fixed, so the norm does not depend on the number of threads.
constexpr std::size_t kSumBlock = kSumOfSquaresBlock;
static_assert(kSumBlock % 32 == 0);
// The backward passes sum dbias over blocks of this many rows, then the blocks' sums in order.
constexpr std::size_t kBackwardRows = 64;

std::size_t pieces_of(std::size_t n, std::size_t piece) { return (n + piece - 1) / piece; }

class CpuKernels final : public Kernels<float> {
 public:
  explicit CpuKernels(int threads) : threads_(threads) {}

  const char* name() const override { return "cpu"; }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) override {
    // OpenBLAS clears C for beta = 0 with a pass of its own (sgemm_beta) before accumulating into
    // it; memset clears it faster, and the product then adds to zeros exactly as it would have:
    // the same bits, 4% less time over the GPT step's products, 20% on the attention's small ones.
    if (beta == 0.0f && m > 0 && n > 0) {
      const std::size_t row_bytes = static_cast<std::size_t>(n) * sizeof(float);
      if (ldc == n)
        std::memset(c, 0, row_bytes * static_cast<std::size_t>(m));
      else
        for (int i = 0; i < m; ++i) std::memset(c + static_cast<std::ptrdiff_t>(i) * ldc, 0, row_bytes);
      beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc);
  }

  // Pieces of whole rows.
  void bias_activation_forward(Activation act, int rows, int cols, const float* bias, float* z, float* out,
                               const DropoutParams& dropout) override {
    in_row_pieces(rows, cols, [&](std::size_t first, int n, std::size_t at) {
      DropoutParams d = dropout;
      d.first_row += first;
      bias_activation_loop(act, n, cols, bias, z + at, out + at, d, keep_mask(cols));
    });
  }

  void bias_gelu_forward(int rows, int cols, const float* bias, float* z, float* out) override {
    in_row_pieces(rows, cols,
                  [&](std::size_t, int n, std::size_t at) { bias_gelu_loop(n, cols, bias, z + at, out + at); });
  }

  // Pieces of kBackwardRows rows, each with its own partial dbias, which are added up in piece
  // order: the same sums for any number of threads. (Splitting the columns instead keeps each
  // column's sum in row order, but measured 20% slower on two threads than on one here: every
  // thread then streams short pieces of every row.)
  void activation_backward(Activation act, int rows, int cols, const float* z, const float* dout, float* dz,
                           float* dbias, const DropoutParams& dropout) override {
    in_row_blocks(rows, cols, dbias, [&](std::size_t first, int n, std::size_t at, float* block_dbias) {
      DropoutParams d = dropout;
      d.first_row += first;
      activation_backward_loop(act, n, cols, z + at, dout + at, dz + at, block_dbias, d, keep_mask(cols));
    });
  }

  void gelu_backward(int rows, int cols, const float* derivative, const float* dout, float* dz, float* dbias) override {
    in_row_blocks(rows, cols, dbias, [&](std::size_t, int n, std::size_t at, float* block_dbias) {
      gelu_backward_loop(n, cols, derivative + at, dout + at, dz + at, block_dbias);
    });
  }

  // Per row: one pass for the maximum, one for the exponentials (kept in dlogits), one to turn
  // them into the gradient. With sum(target) = 1 the loss is
  //   log(sum exp(z - max)) - (1 - s) * (z_label - max) - s / classes * sum(z - max).
  LossResult softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                                   float label_smoothing, float grad_scale, float* dlogits) override {
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
      const float loss = std::log(sum_exp) - (1.0f - label_smoothing) * (z[label] - max) - smooth_target * sum_shifted;
      result.loss_sum += static_cast<double>(loss);
      result.correct += arg_max == label;
      if (!dz) continue;
      const float inv_sum_exp = 1.0f / sum_exp;
      for (int c = 0; c < classes; ++c) dz[c] = (dz[c] * inv_sum_exp - smooth_target) * grad_scale;
      dz[label] -= (1.0f - label_smoothing) * grad_scale;
    }
    return result;
  }

  void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v, const AdamWParams& h) override {
    pool_.parallel(threads(), pieces_of(n, kPiece), [&](std::size_t piece) {
      const std::size_t at = piece * kPiece;
      adamw_loop(std::min(kPiece, n - at), param + at, grad + at, m + at, v + at, h);
    });
  }

  void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer, const SgdParams& h) override {
    pool_.parallel(threads(), pieces_of(n, kPiece), [&](std::size_t piece) {
      const std::size_t at = piece * kPiece;
      sgd_loop(std::min(kPiece, n - at), param + at, grad + at, momentum_buffer + at, h);
    });
  }

  double sum_of_squares(std::size_t n, const float* x) override {
    const std::size_t blocks = pieces_of(n, kSumBlock);
    if (blocks <= 1) return sum_of_squares_loop(n, x);
    block_sums_.resize(blocks);
    pool_.parallel(threads(), blocks, [&](std::size_t block) {
      const std::size_t at = block * kSumBlock;
      block_sums_[block] = sum_of_squares_loop(std::min(kSumBlock, n - at), x + at);
    });
    double sum = 0.0;
    for (double s : block_sums_) sum += s;
    return sum;
  }

  void scale(std::size_t n, float alpha, float* x) override {
    pool_.parallel(threads(), pieces_of(n, kPiece), [&](std::size_t piece) {
      const std::size_t at = piece * kPiece;
      scale_loop(std::min(kPiece, n - at), alpha, x + at);
    });
  }

 private:
  // The threads of this rank: the constructor's number, or OpenBLAS's (which the engine sets to
  // the rank's share of the cores) when that is 0.
  int threads() const { return threads_ > 0 ? threads_ : std::max(1, openblas_get_num_threads()); }

  // loop(first row, rows, first element) over pieces of whole rows, about kPiece elements each.
  template <typename Loop>
  void in_row_pieces(int rows, int cols, Loop&& loop) {
    if (rows <= 0 || cols <= 0) return;
    const std::size_t rows_per_piece = std::max<std::size_t>(1, kPiece / static_cast<std::size_t>(cols));
    pool_.parallel(threads(), pieces_of(static_cast<std::size_t>(rows), rows_per_piece), [&](std::size_t piece) {
      const std::size_t first = piece * rows_per_piece;
      const int n = static_cast<int>(std::min(rows_per_piece, static_cast<std::size_t>(rows) - first));
      loop(first, n, first * static_cast<std::size_t>(cols));
    });
  }

  // loop(first row, rows, first element, the block's dbias) over blocks of kBackwardRows rows,
  // each with its own partial dbias, which are added up in block order: the same sums for any
  // number of threads.
  template <typename Loop>
  void in_row_blocks(int rows, int cols, float* dbias, Loop&& loop) {
    if (rows <= 0 || cols <= 0) return;
    const int blocks = (rows + kBackwardRows - 1) / kBackwardRows;
    if (blocks == 1) return loop(0, rows, 0, dbias);
    dbias_partial_.resize(static_cast<std::size_t>(blocks) * static_cast<std::size_t>(cols));
    pool_.parallel(threads(), static_cast<std::size_t>(blocks), [&](std::size_t block) {
      const std::size_t first = block * kBackwardRows;
      const int n = static_cast<int>(std::min<std::size_t>(kBackwardRows, static_cast<std::size_t>(rows) - first));
      loop(first, n, first * static_cast<std::size_t>(cols), &dbias_partial_[block * static_cast<std::size_t>(cols)]);
    });
    add_block_sums(blocks, cols, dbias_partial_.data(), dbias);
  }

  // One row's dropout mask, per thread (the pool's workers and the caller each have their own).
  static std::uint32_t* keep_mask(int cols) {
    thread_local std::vector<std::uint32_t> keep;
    if (keep.size() < static_cast<std::size_t>(cols)) keep.resize(static_cast<std::size_t>(cols));
    return keep.data();
  }

  int threads_;
  ThreadPool pool_;
  std::vector<double> block_sums_;
  std::vector<float> dbias_partial_;  // in_row_blocks' per-block sums
};

}  // namespace

std::unique_ptr<Kernels<float>> make_cpu_kernels(int threads) { return std::make_unique<CpuKernels>(threads); }

}  // namespace slurm_train::kernels
