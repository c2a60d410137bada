// Kernel tests: the CPU kernels against the reference kernels on random shapes, both against
// direct double-precision computations and PyTorch's optimizers, and the reference gradients in
// double against central finite differences (the basis of the engine's gradient check).
#include "kernels/cpu/reference_kernels.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace {

using namespace slurm_train::kernels;

constexpr Activation kActivations[] = {Activation::kIdentity, Activation::kRelu, Activation::kGelu};

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    default:
      return "identity";
  }
}

template <typename T>
std::vector<T> uniform_vector(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(uniform(rng));
  return v;
}

std::vector<std::int32_t> random_labels(int rows, int classes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> label(0, classes - 1);
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels) l = label(rng);
  return labels;
}

// Index of the first element with |got - want| > atol + rtol * |want|, or -1 when all are close.
template <typename T>
long first_mismatch(const std::vector<T>& got, const std::vector<T>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) return static_cast<long>(i);
  }
  return -1;
}

#define CHECK_ALL_CLOSE(got, want, rtol, atol)                                                          \
  do {                                                                                                  \
    const auto& got_ = (got);                                                                           \
    const auto& want_ = (want);                                                                         \
    const long bad = first_mismatch(got_, want_, rtol, atol);                                           \
    CHECK_MESSAGE(bad == -1, "element " << bad << ": " << (bad < 0 ? 0.0 : double(got_[bad])) << " vs " \
                                        << (bad < 0 ? 0.0 : double(want_[bad])));                       \
  } while (0)

// The two float implementations, for test cases that compare them or hold for both.
struct FloatKernels {
  std::unique_ptr<Kernels<float>> ref = make_reference_kernels<float>();
  std::unique_ptr<Kernels<float>> cpu = make_cpu_kernels();
  std::vector<Kernels<float>*> both() const { return {ref.get(), cpu.get()}; }
};

// ---- gemm -----------------------------------------------------------------------------------

// A rows x cols matrix stored with leading dimension ld >= cols; the padding holds NaN, so a
// kernel that reads it produces NaN.
std::vector<float> padded_matrix(int rows, int cols, int ld, std::uint64_t seed) {
  std::vector<float> values = uniform_vector<float>(std::size_t(rows) * cols, seed);
  std::vector<float> m(std::size_t(rows) * ld, std::numeric_limits<float>::quiet_NaN());
  for (int r = 0; r < rows; ++r)
    std::copy_n(values.begin() + std::size_t(r) * cols, cols, m.begin() + std::size_t(r) * ld);
  return m;
}

TEST_CASE("kernels: reference gemm on a hand-computed product, every transpose") {
  auto ref = make_reference_kernels<double>();
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12], A B = [58 64; 139 154]; with alpha = 2,
  // beta = -1 and C = 1: C = 2 A B - 1.
  const double a[] = {1, 2, 3, 4, 5, 6}, a_t[] = {1, 4, 2, 5, 3, 6};
  const double b[] = {7, 8, 9, 10, 11, 12}, b_t[] = {7, 9, 11, 8, 10, 12};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      double c[] = {1, 1, 1, 1};
      ref->gemm(ta, tb, 2, 2, 3, 2.0, ta ? a_t : a, ta ? 2 : 3, tb ? b_t : b, tb ? 3 : 2, -1.0, c, 2);
      CHECK(std::vector<double>(c, c + 4) == std::vector<double>{115, 127, 277, 307});
    }
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: gemm cpu matches the reference (float) on random shapes") {
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {3, 5, 1}, {17, 31, 13}, {64, 10, 128}, {257, 129, 65}};
  struct Scalars {
    float alpha, beta;
  };
  const Scalars scalars[] = {{1.0f, 0.0f}, {0.5f, -1.25f}, {-2.0f, 1.0f}};
  std::uint64_t seed = 1;
  for (const Shape& s : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (const Scalars& sc : scalars) {
          for (int pad : {0, 3}) {
            CAPTURE(s.m);
            CAPTURE(s.n);
            CAPTURE(s.k);
            CAPTURE(ta);
            CAPTURE(tb);
            CAPTURE(sc.alpha);
            CAPTURE(sc.beta);
            CAPTURE(pad);
            // Stored shapes: op(A) is m x k, op(B) is k x n.
            const int a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
            const int b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
            const int lda = a_cols + pad, ldb = b_cols + pad, ldc = s.n + pad;
            const auto a = padded_matrix(a_rows, a_cols, lda, ++seed);
            const auto b = padded_matrix(b_rows, b_cols, ldb, ++seed);
            auto c_ref = padded_matrix(s.m, s.n, ldc, ++seed);
            // The padding of C must survive: a sentinel instead of NaN.
            for (int i = 0; i < s.m; ++i) std::fill_n(c_ref.begin() + std::size_t(i) * ldc + s.n, pad, 12345.0f);
            const auto c_old = c_ref;
            auto c_cpu = c_ref;
            ref->gemm(ta, tb, s.m, s.n, s.k, sc.alpha, a.data(), lda, b.data(), ldb, sc.beta, c_ref.data(), ldc);
            cpu->gemm(ta, tb, s.m, s.n, s.k, sc.alpha, a.data(), lda, b.data(), ldb, sc.beta, c_cpu.data(), ldc);
            // Error bound of a k-term dot product (Higham: k u sum|a b|), plus alpha and beta,
            // doubled for two independently rounded results; u = 2^-24.
            const double u = std::ldexp(1.0, -24);
            long bad = -1;
            for (int i = 0; i < s.m && bad < 0; ++i) {
              for (int j = 0; j < s.n && bad < 0; ++j) {
                double magnitude = 0.0;
                for (int p = 0; p < s.k; ++p) {
                  const float av = ta ? a[std::size_t(p) * lda + i] : a[std::size_t(i) * lda + p];
                  const float bv = tb ? b[std::size_t(j) * ldb + p] : b[std::size_t(p) * ldb + j];
                  magnitude += std::abs(double(av) * bv);
                }
                const std::size_t at = std::size_t(i) * ldc + j;
                magnitude = std::abs(sc.alpha) * magnitude + std::abs(sc.beta * c_old[at]);
                const double tol = 2.0 * (s.k + 2) * u * magnitude;
                if (!(std::abs(double(c_cpu[at]) - c_ref[at]) <= tol)) bad = long(at);
              }
            }
            CHECK_MESSAGE(bad == -1, "C element " << bad);
            for (int i = 0; i < s.m; ++i)
              for (int j = s.n; j < ldc; ++j) {
                REQUIRE(c_ref[std::size_t(i) * ldc + j] == 12345.0f);
                REQUIRE(c_cpu[std::size_t(i) * ldc + j] == 12345.0f);
              }
          }
        }
      }
    }
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: gemm with beta == 0 ignores NaN in C, as BLAS does") {
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    const auto a = uniform_vector<float>(6 * 4, 11), b = uniform_vector<float>(4 * 5, 12);
    std::vector<float> c(6 * 5, std::numeric_limits<float>::quiet_NaN());
    k->gemm(false, false, 6, 5, 4, 1.0f, a.data(), 4, b.data(), 5, 0.0f, c.data(), 5);
    CHECK(std::none_of(c.begin(), c.end(), [](float x) { return std::isnan(x); }));
  }
}

TEST_CASE("kernels: gemm cpu is deterministic") {
  auto cpu = make_cpu_kernels();
  const int m = 257, n = 129, k = 65;
  const auto a = uniform_vector<float>(m * k, 21), b = uniform_vector<float>(k * n, 22);
  std::vector<float> c1(m * n), c2(m * n);
  cpu->gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c1.data(), n);
  cpu->gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c2.data(), n);
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
}

// ---- bias + activation ----------------------------------------------------------------------

TEST_CASE("kernels: reference activations at known points") {
  auto ref = make_reference_kernels<double>();
  const double bias[] = {0.5, -0.5};
  const double z_in[] = {-1.5, 1.5, 0.5, -0.5};  // z + bias = {-1, 1, 1, -1}
  // gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.841344746068543 (torch.nn.functional.gelu).
  const double gelu1 = 0.841344746068543;
  struct Expected {
    Activation act;
    std::vector<double> out;
  };
  for (const Expected& e : {Expected{Activation::kIdentity, {-1, 1, 1, -1}}, Expected{Activation::kRelu, {0, 1, 1, 0}},
                            Expected{Activation::kGelu, {gelu1 - 1, gelu1, gelu1, gelu1 - 1}}}) {
    CAPTURE(activation_name(e.act));
    std::vector<double> z(z_in, z_in + 4), out(4);
    ref->bias_activation_forward(e.act, 2, 2, bias, z.data(), out.data(), {});
    CHECK(z == std::vector<double>{-1, 1, 1, -1});
    CHECK_ALL_CLOSE(out, e.out, 1e-14, 1e-15);
  }
}

// No dropout, and dropout with p = 0.3 (kept units scaled by 1 / 0.7, not exact in float).
const DropoutParams kDropouts[] = {{}, {0.3f, 0x5eed, 1000}};

TEST_CASE_FIXTURE(FloatKernels, "kernels: bias_activation_forward cpu matches the reference, every activation") {
  struct Shape {
    int rows, cols;
  };
  for (Activation act : kActivations) {
    for (Shape s : {Shape{1, 1}, Shape{7, 13}, Shape{64, 129}}) {
      for (const DropoutParams& dropout : kDropouts) {
        CAPTURE(activation_name(act));
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        CAPTURE(dropout.p);
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto bias = uniform_vector<float>(s.cols, 31);
        auto z_ref = uniform_vector<float>(n, 32, -3, 3), z_cpu = z_ref;
        std::vector<float> out_ref(n), out_cpu(n);
        ref->bias_activation_forward(act, s.rows, s.cols, bias.data(), z_ref.data(), out_ref.data(), dropout);
        cpu->bias_activation_forward(act, s.rows, s.cols, bias.data(), z_cpu.data(), out_cpu.data(), dropout);
        CHECK(z_cpu == z_ref);  // one float addition each: exact
        CHECK_ALL_CLOSE(out_cpu, out_ref, 1e-6, 1e-7);
        CHECK(out_cpu == out_ref);  // no libm call (GELU's too): bit for bit, at every vector width
      }
    }
  }
  {
    INFO("identity in place (out == z)");
    const auto bias = uniform_vector<float>(5, 33);
    auto z_ref = uniform_vector<float>(15, 34), z_cpu = z_ref;
    ref->bias_activation_forward(Activation::kIdentity, 3, 5, bias.data(), z_ref.data(), z_ref.data(), {});
    cpu->bias_activation_forward(Activation::kIdentity, 3, 5, bias.data(), z_cpu.data(), z_cpu.data(), {});
    CHECK(z_cpu == z_ref);
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: activation_backward cpu matches the reference, every activation") {
  struct Shape {
    int rows, cols;
  };
  for (Activation act : kActivations) {
    for (Shape s : {Shape{1, 1}, Shape{7, 13}, Shape{300, 65}}) {
      for (const DropoutParams& dropout : kDropouts) {
        for (bool in_place : {false, true}) {
          CAPTURE(activation_name(act));
          CAPTURE(s.rows);
          CAPTURE(s.cols);
          CAPTURE(dropout.p);
          CAPTURE(in_place);
          const std::size_t n = std::size_t(s.rows) * s.cols;
          const auto z = uniform_vector<float>(n, 41, -3, 3);
          auto dout_ref = uniform_vector<float>(n, 42), dout_cpu = dout_ref;
          std::vector<float> dz_ref(n), dz_cpu(n), dbias_ref(s.cols), dbias_cpu(s.cols, 99.0f);
          float* dz_ref_at = in_place ? dout_ref.data() : dz_ref.data();
          float* dz_cpu_at = in_place ? dout_cpu.data() : dz_cpu.data();
          ref->activation_backward(act, s.rows, s.cols, z.data(), dout_ref.data(), dz_ref_at, dbias_ref.data(),
                                   dropout);
          cpu->activation_backward(act, s.rows, s.cols, z.data(), dout_cpu.data(), dz_cpu_at, dbias_cpu.data(),
                                   dropout);
          CHECK_ALL_CLOSE(in_place ? dout_cpu : dz_cpu, in_place ? dout_ref : dz_ref, 1e-6, 1e-7);
          // Column sums of up to 300 terms below 1: float rounding stays far below 1e-5.
          CHECK_ALL_CLOSE(dbias_cpu, dbias_ref, 1e-5, 1e-5);
        }
      }
    }
  }
}

// ---- dropout --------------------------------------------------------------------------------

// Dropout alone, through the kernels that apply it: forward with the identity and a zero bias
// gives dropout(x); backward with the identity gives dropout(dout).
std::vector<float> dropout_forward(Kernels<float>& k, int rows, int cols, const DropoutParams& d,
                                   std::vector<float> x) {
  const std::vector<float> zero_bias(cols, 0.0f);
  std::vector<float> out(x.size());
  k.bias_activation_forward(Activation::kIdentity, rows, cols, zero_bias.data(), x.data(), out.data(), d);
  return out;
}

std::vector<float> dropout_backward(Kernels<float>& k, int rows, int cols, const DropoutParams& d,
                                    const std::vector<float>& dout) {
  const std::vector<float> z(dout.size(), 0.0f);
  std::vector<float> dz(dout.size()), dbias(cols);
  k.activation_backward(Activation::kIdentity, rows, cols, z.data(), dout.data(), dz.data(), dbias.data(), d);
  return dz;
}

TEST_CASE("kernels: the integer dropout test agrees with the float one") {
  // Each p at a 24-bit boundary (k / 2^24), just below and just above it, and common rates.
  std::vector<float> ps = {0.0f, 0.1f, 0.2f, 0.25f, 0.3f, 0.5f, 0.9f, 0.999f};
  for (std::uint64_t k : {1ull, 2ull, 12345ull, 1ull << 23, (1ull << 24) - 1}) {
    const float p = static_cast<float>(k) / 16777216.0f;
    ps.insert(ps.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, 1.0f)});
  }
  for (float p : ps) {
    CAPTURE(p);
    const std::uint64_t threshold = dropout_threshold(p);
    // Every 24-bit value near the threshold, then the test on real draws.
    for (std::uint64_t bits = threshold > 2 ? threshold - 2 : 0; bits < threshold + 2; ++bits)
      REQUIRE((bits >= threshold) == (static_cast<float>(bits) * (1.0f / 16777216.0f) >= p));
    for (std::uint64_t col = 0; col < 1000; ++col)
      REQUIRE((counter_bits24(7, 3, col) >= threshold) == dropout_keeps(7, 3, col, p));
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: dropout") {
  const int rows = 8, cols = 37;
  const std::size_t n = std::size_t(rows) * cols;
  const std::uint64_t seed = 0x5eed, first_row = 1000;
  auto params = [&](float p, std::uint64_t s = 0x5eed, std::uint64_t row = 1000) { return DropoutParams{p, s, row}; };
  // Values bounded away from zero, so that a zero output means a dropped unit.
  const auto x = uniform_vector<float>(n, 51, 0.5, 2.0);

  {
    INFO("cpu equals the reference bit for bit");
    CHECK(dropout_forward(*cpu, rows, cols, params(0.3f), x) == dropout_forward(*ref, rows, cols, params(0.3f), x));
    CHECK(dropout_backward(*cpu, rows, cols, params(0.3f), x) == dropout_backward(*ref, rows, cols, params(0.3f), x));
  }
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    {
      INFO("forward and backward drop the same units, kept units scaled exactly");
      // p = 0.75: the scale 1 / (1 - p) = 4 is exact, so kept units are exactly 4x.
      const auto backward_in = uniform_vector<float>(n, 52, -2.0, -0.5);
      const auto forward = dropout_forward(*k, rows, cols, params(0.75f), x);
      const auto backward = dropout_backward(*k, rows, cols, params(0.75f), backward_in);
      int kept = 0;
      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        REQUIRE((forward[i] == 0.0f) == (backward[i] == 0.0f));
        if (forward[i] == 0.0f) continue;
        ++kept;
        REQUIRE(forward[i] == 4.0f * x[i]);
        REQUIRE(backward[i] == 4.0f * backward_in[i]);
      }
      CHECK(kept > 0);
      CHECK(kept < int(n));
    }
    {
      INFO("the mask does not depend on how rows are split");
      const auto whole = dropout_forward(*k, rows, cols, params(0.5f), x);
      const std::vector<float> top(x.begin(), x.begin() + 3 * cols), rest(x.begin() + 3 * cols, x.end());
      auto split = dropout_forward(*k, 3, cols, params(0.5f, seed, first_row), top);
      const auto split_rest = dropout_forward(*k, rows - 3, cols, params(0.5f, seed, first_row + 3), rest);
      split.insert(split.end(), split_rest.begin(), split_rest.end());
      CHECK(split == whole);
    }
    {
      INFO("the mask depends on the seed and the global row");
      const auto base = dropout_forward(*k, rows, cols, params(0.5f), x);
      CHECK(base != dropout_forward(*k, rows, cols, params(0.5f, seed + 1), x));
      CHECK(base != dropout_forward(*k, rows, cols, params(0.5f, seed, first_row + 1), x));
    }
    {
      INFO("p = 0 keeps everything unchanged");
      CHECK(dropout_forward(*k, rows, cols, params(0.0f), x) == x);
      CHECK(dropout_backward(*k, rows, cols, params(0.0f), x) == x);
    }
  }
  {
    INFO("the fraction kept is about 1 - p");
    // 200k draws: the standard deviation of the kept fraction is about 0.001; allow 0.005.
    for (float p : {0.1f, 0.5f, 0.9f}) {
      CAPTURE(p);
      const auto out = dropout_forward(*cpu, 200, 1000, params(p, seed, 0), std::vector<float>(200 * 1000, 1.0f));
      const double kept = double(std::count_if(out.begin(), out.end(), [](float v) { return v != 0.0f; })) / out.size();
      CHECK(std::abs(kept - (1.0 - p)) < 0.005);
    }
  }
}

// ---- softmax cross-entropy ------------------------------------------------------------------

struct DirectLoss {
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::vector<double> dlogits;
};

// The definition, written out in double: softmax, then -sum target log softmax.
template <typename T>
DirectLoss direct_softmax_cross_entropy(int rows, int classes, const std::vector<T>& logits,
                                        const std::vector<std::int32_t>& labels, double smoothing, double grad_scale) {
  DirectLoss out;
  out.dlogits.resize(logits.size());
  for (int r = 0; r < rows; ++r) {
    const T* z = logits.data() + std::size_t(r) * classes;
    double max = z[0], sum = 0.0;
    int arg_max = 0;
    for (int c = 1; c < classes; ++c)
      if (z[c] > z[arg_max]) arg_max = c, max = z[c];
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - max);
    for (int c = 0; c < classes; ++c) {
      const double softmax = std::exp(double(z[c]) - max) / sum;
      const double target = smoothing / classes + (c == labels[r] ? 1.0 - smoothing : 0.0);
      out.loss_sum -= target * std::log(softmax);
      out.dlogits[std::size_t(r) * classes + c] = (softmax - target) * grad_scale;
    }
    out.correct += arg_max == labels[r];
  }
  return out;
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: softmax_cross_entropy matches a direct double computation") {
  struct Shape {
    int rows, classes;
  };
  for (Kernels<float>* k : both()) {
    for (Shape s : {Shape{1, 1}, Shape{1, 2}, Shape{33, 10}, Shape{64, 1000}}) {
      for (float smoothing : {0.0f, 0.1f}) {
        INFO("kernels " << k->name());
        CAPTURE(s.rows);
        CAPTURE(s.classes);
        CAPTURE(smoothing);
        const auto logits = uniform_vector<float>(std::size_t(s.rows) * s.classes, 61, -8, 8);
        const auto labels = random_labels(s.rows, s.classes, 62);
        const float grad_scale = 1.0f / s.rows;
        std::vector<float> dlogits(logits.size());
        const LossResult got = k->softmax_cross_entropy(s.rows, s.classes, logits.data(), labels.data(), smoothing,
                                                        grad_scale, dlogits.data());
        const DirectLoss want =
            direct_softmax_cross_entropy(s.rows, s.classes, logits, labels, double(smoothing), grad_scale);
        // Float logits up to 8 in magnitude: a few ulps of 8 per row, relative 1e-5 of the sum.
        CHECK(got.loss_sum == doctest::Approx(want.loss_sum).epsilon(1e-5).scale(1.0));
        CHECK(got.correct == want.correct);
        const std::vector<double> got_d(dlogits.begin(), dlogits.end());
        CHECK_ALL_CLOSE(got_d, want.dlogits, 1e-5, 1e-6 * grad_scale);
        // Softmax and target each sum to 1: every gradient row sums to 0, up to the rounding
        // of a float sum of `classes` exponentials (relative classes * u, u = 2^-24), doubled.
        const double row_tolerance = 2.0 * s.classes * std::ldexp(1.0, -24) * grad_scale;
        for (int r = 0; r < s.rows; ++r) {
          double row_sum = 0.0;
          for (int c = 0; c < s.classes; ++c) row_sum += dlogits[std::size_t(r) * s.classes + c];
          REQUIRE(std::abs(row_sum) <= row_tolerance);
        }
        const LossResult eval =
            k->softmax_cross_entropy(s.rows, s.classes, logits.data(), labels.data(), smoothing, grad_scale, nullptr);
        CHECK(eval.loss_sum == got.loss_sum);
        CHECK(eval.correct == got.correct);
      }
    }
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: softmax_cross_entropy edge cases") {
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    {
      INFO("huge logits stay finite");
      const std::vector<float> logits = {1000.0f, 0.0f, -1000.0f, 1000.0f, 999.0f, 998.0f};
      const std::int32_t labels[] = {1, 0};
      std::vector<float> d(6);
      const LossResult got = k->softmax_cross_entropy(2, 3, logits.data(), labels, 0.0f, 1.0f, d.data());
      // Row 0: loss 1000; row 1: log(1 + e^-1 + e^-2) = 0.40760596444.
      CHECK(got.loss_sum == doctest::Approx(1000.40760596444).epsilon(1e-6));
      CHECK(got.correct == 1);
      CHECK(std::all_of(d.begin(), d.end(), [](float v) { return std::isfinite(v); }));
    }
    {
      INFO("ties: the first maximum is the prediction");
      const std::vector<float> logits = {2.0f, 2.0f, 1.0f, 1.0f, 3.0f, 3.0f};
      const std::int32_t labels[] = {0, 1};
      const LossResult got = k->softmax_cross_entropy(2, 3, logits.data(), labels, 0.0f, 1.0f, nullptr);
      CHECK(got.correct == 2);
    }
    {
      INFO("full smoothing on uniform logits: loss log(classes), zero gradient");
      const std::vector<float> logits(4 * 5, 0.25f);
      const std::int32_t labels[] = {0, 1, 2, 4};
      std::vector<float> d(20, 7.0f);
      const LossResult got = k->softmax_cross_entropy(4, 5, logits.data(), labels, 1.0f, 1.0f, d.data());
      CHECK(got.loss_sum == doctest::Approx(4 * std::log(5.0)).epsilon(1e-6));
      CHECK(std::all_of(d.begin(), d.end(), [](float v) { return std::abs(v) < 1e-7f; }));
    }
    {
      INFO("a label outside [0, classes) throws, naming row and label, and writes nothing");
      const auto logits = uniform_vector<float>(3 * 10, 63);
      for (std::int32_t bad : {-1, 10}) {
        CAPTURE(bad);
        const std::int32_t labels[] = {0, 9, bad};
        std::vector<float> d(30, 7.0f);
        try {
          k->softmax_cross_entropy(3, 10, logits.data(), labels, 0.0f, 1.0f, d.data());
          FAIL("no exception");
        } catch (const std::out_of_range& e) {
          const std::string what = e.what();
          CHECK(what.find("row 2") != std::string::npos);
          CHECK(what.find("label " + std::to_string(bad)) != std::string::npos);
        }
        CHECK(std::all_of(d.begin(), d.end(), [](float v) { return v == 7.0f; }));
      }
    }
  }
}

TEST_CASE("kernels: softmax_cross_entropy cpu is deterministic") {
  auto cpu = make_cpu_kernels();
  const auto logits = uniform_vector<float>(128 * 10, 64, -5, 5);
  const auto labels = random_labels(128, 10, 65);
  std::vector<float> d1(logits.size()), d2(logits.size());
  const LossResult r1 = cpu->softmax_cross_entropy(128, 10, logits.data(), labels.data(), 0.1f, 0.5f, d1.data());
  const LossResult r2 = cpu->softmax_cross_entropy(128, 10, logits.data(), labels.data(), 0.1f, 0.5f, d2.data());
  CHECK(std::memcmp(&r1.loss_sum, &r2.loss_sum, sizeof(double)) == 0);
  CHECK(std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)) == 0);
}

// ---- optimizers -----------------------------------------------------------------------------

TEST_CASE_FIXTURE(FloatKernels, "kernels: adamw first step by hand") {
  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2; bias-corrected m / sqrt(v) is g / |g|.
  const double p0 = 1.0, g = 0.5, lr = 0.1, wd = 0.01, eps = 1e-8;
  const double decayed = p0 * (1.0 - lr * wd);
  const double want = decayed - lr * g / (std::abs(g) + eps);
  AdamWParams h;
  h.lr = float(lr);
  h.weight_decay = float(wd);
  h.eps = float(eps);
  h.step = 1;
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    float p = float(p0), grad = float(g), m = 0.0f, v = 0.0f;
    k->adamw_update(1, &p, &grad, &m, &v, h);
    CHECK(p == doctest::Approx(want).epsilon(1e-6));
    CHECK(m == doctest::Approx(0.1 * g).epsilon(1e-6));
    CHECK(v == doctest::Approx(0.001 * g * g).epsilon(1e-6));
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: sgd one step by hand, nesterov off and on") {
  // p = 1, g = 0.2, buffer = 0.5, lr = 0.1, momentum = 0.9, weight decay = 0.1:
  // g' = 0.2 + 0.1 = 0.3, buffer = 0.45 + 0.3 = 0.75;
  // plain: p = 1 - 0.1 * 0.75 = 0.925; nesterov: p = 1 - 0.1 * (0.3 + 0.9 * 0.75) = 0.9025.
  for (Kernels<float>* k : both()) {
    for (bool nesterov : {false, true}) {
      INFO("kernels " << k->name());
      CAPTURE(nesterov);
      SgdParams h;
      h.lr = 0.1f, h.momentum = 0.9f, h.weight_decay = 0.1f, h.nesterov = nesterov;
      float p = 1.0f, grad = 0.2f, buffer = 0.5f;
      k->sgd_update(1, &p, &grad, &buffer, h);
      CHECK(buffer == doctest::Approx(0.75).epsilon(1e-6));
      CHECK(p == doctest::Approx(nesterov ? 0.9025 : 0.925).epsilon(1e-6));
    }
  }
}

// Three steps of torch.optim (PyTorch 1.13, float32) from these parameters and gradients; the
// expected values were printed by:
//   p = torch.tensor(P0, requires_grad=True); opt = Optimizer([p], ...)
//   for g in GRADS: p.grad = torch.tensor(g); opt.step()
//   print(", ".join("%.9gf" % x for x in p.tolist()))
const std::vector<float> kP0 = {0.5f, -1.0f, 2.0f, 0.0f, 3e-3f};
const std::vector<std::vector<float>> kGrads = {
    {0.1f, -0.2f, 0.3f, 1.0f, -4e-4f}, {-0.05f, 0.4f, 0.0f, -1.0f, 2e-4f}, {0.2f, 0.2f, -0.3f, 0.5f, 0.0f}};

// Parameters of order 1 after three float steps; beta1 and beta2 are floats here and Python
// doubles in torch: agreement to 2e-6 absolute.
constexpr double kTorchTolerance = 2e-6;

TEST_CASE_FIXTURE(FloatKernels, "kernels: adamw matches torch.optim.AdamW over three steps") {
  // AdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
  const std::vector<float> want = {0.479279667f, -0.995872855f, 1.9781909f, -0.0112014757f, 0.0176901054f};
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    auto p = kP0;
    std::vector<float> m(p.size()), v(p.size());
    AdamWParams h;
    h.lr = 0.01f, h.beta1 = 0.9f, h.beta2 = 0.999f, h.eps = 1e-8f, h.weight_decay = 0.1f;
    for (std::size_t s = 0; s < kGrads.size(); ++s) {
      h.step = long(s) + 1;
      k->adamw_update(p.size(), p.data(), kGrads[s].data(), m.data(), v.data(), h);
    }
    CHECK_ALL_CLOSE(p, want, 0.0, kTorchTolerance);
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: sgd matches torch.optim.SGD over three steps") {
  struct Case {
    const char* name;
    SgdParams h;
    std::vector<float> want;
  };
  const Case cases[] = {
      {"SGD(lr=0.1, momentum=0.9, weight_decay=0.01)",
       {0.1f, 0.9f, 0.01f, false},
       {0.45963037f, -1.03623068f, 1.93760359f, -0.130720094f, 0.00305345235f}},
      {"SGD(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)",
       {0.1f, 0.9f, 0.01f, true},
       {0.437227309f, -1.06964636f, 1.93806863f, -0.167231888f, 0.00305891503f}},
      {"SGD(lr=0.1)", {0.1f, 0.0f, 0.0f, false}, {0.474999994f, -1.03999996f, 2.0f, -0.0500000007f, 0.00302000018f}},
  };
  for (Kernels<float>* k : both()) {
    for (const Case& c : cases) {
      INFO("kernels " << k->name());
      CAPTURE(c.name);
      auto p = kP0;
      std::vector<float> buffer(p.size());
      for (const auto& g : kGrads) k->sgd_update(p.size(), p.data(), g.data(), buffer.data(), c.h);
      CHECK_ALL_CLOSE(p, c.want, 0.0, kTorchTolerance);
    }
  }
}

TEST_CASE_FIXTURE(FloatKernels, "kernels: optimizers cpu equal the reference bit for bit on random parameters") {
  const std::size_t n = 1001;
  const auto grad = uniform_vector<float>(n, 71);
  auto p_ref = uniform_vector<float>(n, 72), p_cpu = p_ref;
  auto m_ref = uniform_vector<float>(n, 73, -0.1, 0.1), m_cpu = m_ref;
  auto v_ref = uniform_vector<float>(n, 74, 0.0, 0.01), v_cpu = v_ref;
  AdamWParams adamw;
  adamw.weight_decay = 0.05f, adamw.step = 7;
  ref->adamw_update(n, p_ref.data(), grad.data(), m_ref.data(), v_ref.data(), adamw);
  cpu->adamw_update(n, p_cpu.data(), grad.data(), m_cpu.data(), v_cpu.data(), adamw);
  CHECK(p_cpu == p_ref);
  CHECK(m_cpu == m_ref);
  CHECK(v_cpu == v_ref);
  SgdParams sgd;
  sgd.nesterov = true, sgd.weight_decay = 0.01f;
  ref->sgd_update(n, p_ref.data(), grad.data(), m_ref.data(), sgd);
  cpu->sgd_update(n, p_cpu.data(), grad.data(), m_cpu.data(), sgd);
  CHECK(p_cpu == p_ref);
  CHECK(m_cpu == m_ref);
}

// ---- reductions -----------------------------------------------------------------------------

TEST_CASE_FIXTURE(FloatKernels, "kernels: sum_of_squares accumulates in double; scale") {
  for (Kernels<float>* k : both()) {
    INFO("kernels " << k->name());
    // 2^40 + 1 needs 41 bits: exact in double, rounded to 2^40 in float.
    const float x[] = {1048576.0f, 1.0f};
    CHECK(k->sum_of_squares(2, x) == 1099511627777.0);
    const auto values = uniform_vector<float>(4097, 81);
    double want = 0.0;
    for (float v : values) want += double(v) * v;
    CHECK(k->sum_of_squares(values.size(), values.data()) == doctest::Approx(want).epsilon(1e-12));
    auto scaled = values;
    k->scale(scaled.size(), -0.5f, scaled.data());
    for (std::size_t i = 0; i < values.size(); ++i) REQUIRE(scaled[i] == -0.5f * values[i]);
  }
}

// ---- the element-wise loops on several threads -------------------------------------------------

// Shapes big enough for the CPU kernels to cut them into many pieces (they run small inputs on
// one thread), with widths that are not multiples of the pieces, the vector width or the 16-float
// column blocks.
constexpr int kThreadCounts[] = {1, 2, 3, 4, 7};

TEST_CASE("kernels: cpu forward and backward are bit-identical for any number of threads, and match the reference") {
  auto ref = make_reference_kernels<float>();
  struct Shape {
    int rows, cols;
  };
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    for (Shape s : {Shape{300, 517}, Shape{2049, 40}, Shape{9, 20000}}) {
      for (const DropoutParams& dropout : kDropouts) {
        CAPTURE(activation_name(act));
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        CAPTURE(dropout.p);
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto bias = uniform_vector<float>(s.cols, 101);
        const auto z0 = uniform_vector<float>(n, 102, -3, 3);
        const auto dout = uniform_vector<float>(n, 103);
        std::vector<float> z_first, out_first, dz_first, dbias_first;
        for (int threads : kThreadCounts) {
          CAPTURE(threads);
          auto cpu = make_cpu_kernels(threads);
          auto z = z0;
          std::vector<float> out(n), dz(n), dbias(s.cols, 99.0f);
          cpu->bias_activation_forward(act, s.rows, s.cols, bias.data(), z.data(), out.data(), dropout);
          cpu->activation_backward(act, s.rows, s.cols, z.data(), dout.data(), dz.data(), dbias.data(), dropout);
          if (threads == 1) {
            z_first = z, out_first = out, dz_first = dz, dbias_first = dbias;
            // Against the reference, as the single-threaded tests above.
            auto z_ref = z0;
            std::vector<float> out_ref(n), dz_ref(n), dbias_ref(s.cols);
            ref->bias_activation_forward(act, s.rows, s.cols, bias.data(), z_ref.data(), out_ref.data(), dropout);
            ref->activation_backward(act, s.rows, s.cols, z_ref.data(), dout.data(), dz_ref.data(), dbias_ref.data(),
                                     dropout);
            CHECK(z == z_ref);
            CHECK_ALL_CLOSE(out, out_ref, 1e-6, 1e-7);
            CHECK_ALL_CLOSE(dz, dz_ref, 1e-6, 1e-7);
            // Column sums of up to 2049 terms below 1 in magnitude.
            CHECK_ALL_CLOSE(dbias, dbias_ref, 1e-4, 1e-4);
            continue;
          }
          CHECK(z == z_first);
          CHECK(out == out_first);
          CHECK(dz == dz_first);
          CHECK(dbias == dbias_first);  // fixed blocks of rows, summed in block order
        }
      }
    }
  }
}

TEST_CASE(
    "kernels: bias_gelu_forward and gelu_backward give bias_activation_forward's and activation_backward's "
    "bits with kGelu, keep GELU's derivative, on any number of threads, in place, and as the reference") {
  auto ref = make_reference_kernels<float>();
  struct Shape {
    int rows, cols;
  };
  for (Shape s : {Shape{1, 1}, Shape{7, 13}, Shape{300, 517}, Shape{2049, 40}, Shape{9, 20000}}) {
    for (bool in_place : {false, true}) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      CAPTURE(in_place);
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto bias = uniform_vector<float>(s.cols, 111);
      const auto z0 = uniform_vector<float>(n, 112, -6, 6);
      const auto dout = uniform_vector<float>(n, 113);
      for (int threads : kThreadCounts) {
        CAPTURE(threads);
        auto cpu = make_cpu_kernels(threads);
        // The pair with the pre-activation kept.
        auto pre = z0;
        std::vector<float> out_pair(n), dz_pair(n), dbias_pair(s.cols);
        cpu->bias_activation_forward(Activation::kGelu, s.rows, s.cols, bias.data(), pre.data(), out_pair.data(), {});
        cpu->activation_backward(Activation::kGelu, s.rows, s.cols, pre.data(), dout.data(), dz_pair.data(),
                                 dbias_pair.data(), {});
        // The pair with the derivative kept.
        auto derivative = z0, grads = dout;
        std::vector<float> out(n), dz(n), dbias(s.cols, 99.0f);
        cpu->bias_gelu_forward(s.rows, s.cols, bias.data(), derivative.data(), out.data());
        float* dz_at = in_place ? grads.data() : dz.data();
        cpu->gelu_backward(s.rows, s.cols, derivative.data(), grads.data(), dz_at, dbias.data());
        CHECK(out == out_pair);
        CHECK((in_place ? grads : dz) == dz_pair);
        CHECK(dbias == dbias_pair);
        bool derivative_kept = true;
        for (std::size_t i = 0; i < n; ++i)
          derivative_kept = derivative_kept && derivative[i] == gelu_derivative(pre[i]);
        CHECK(derivative_kept);
        if (threads > 1) continue;
        auto z_ref = z0;
        std::vector<float> out_ref(n), dz_ref(n), dbias_ref(s.cols);
        ref->bias_gelu_forward(s.rows, s.cols, bias.data(), z_ref.data(), out_ref.data());
        ref->gelu_backward(s.rows, s.cols, z_ref.data(), dout.data(), dz_ref.data(), dbias_ref.data());
        CHECK_ALL_CLOSE(out, out_ref, 1e-6, 1e-7);
        CHECK_ALL_CLOSE(derivative, z_ref, 1e-6, 1e-7);
        CHECK_ALL_CLOSE(in_place ? grads : dz, dz_ref, 1e-6, 1e-7);
        CHECK_ALL_CLOSE(dbias, dbias_ref, 1e-4, 1e-4);
      }
    }
  }
}

TEST_CASE("kernels: cpu optimizers, scale and sum_of_squares are bit-identical for any number of threads") {
  auto ref = make_reference_kernels<float>();
  const std::size_t n = 300007;  // about nine pieces and a ragged end
  const auto grad = uniform_vector<float>(n, 111);
  const auto p0 = uniform_vector<float>(n, 112), m0 = uniform_vector<float>(n, 113, -0.1, 0.1);
  const auto v0 = uniform_vector<float>(n, 114, 0.0, 0.01);
  AdamWParams adamw;
  adamw.weight_decay = 0.05f, adamw.step = 3;
  SgdParams sgd;
  sgd.nesterov = true, sgd.weight_decay = 0.01f;
  double want_sum = 0.0;
  for (float g : grad) want_sum += double(g) * g;
  // The expected parameters: the reference, which is bit-exact with the cpu loops.
  auto p_ref = p0, m_ref = m0, v_ref = v0;
  ref->adamw_update(n, p_ref.data(), grad.data(), m_ref.data(), v_ref.data(), adamw);
  ref->sgd_update(n, p_ref.data(), grad.data(), m_ref.data(), sgd);
  ref->scale(n, 0.75f, p_ref.data());
  double first_sum = 0.0;
  for (int threads : kThreadCounts) {
    CAPTURE(threads);
    auto cpu = make_cpu_kernels(threads);
    auto p = p0, m = m0, v = v0;
    cpu->adamw_update(n, p.data(), grad.data(), m.data(), v.data(), adamw);
    CHECK(v == v_ref);
    cpu->sgd_update(n, p.data(), grad.data(), m.data(), sgd);
    cpu->scale(n, 0.75f, p.data());
    CHECK(p == p_ref);
    CHECK(m == m_ref);
    const double sum = cpu->sum_of_squares(n, grad.data());
    CHECK(sum == doctest::Approx(want_sum).epsilon(1e-12));
    if (threads == 1) first_sum = sum;
    CHECK(sum == first_sum);  // fixed blocks, summed in block order
  }
}

TEST_CASE("kernels: cpu kernels follow OpenBLAS's thread count when given none") {
  // make_cpu_kernels() uses openblas_get_num_threads() at each call; the result is the same.
  const std::size_t n = 100003;
  const auto x = uniform_vector<float>(n, 121);
  CHECK(make_cpu_kernels()->sum_of_squares(n, x.data()) == make_cpu_kernels(3)->sum_of_squares(n, x.data()));
}

// ---- gradients against finite differences (double) ------------------------------------------

// Central differences with h = 1e-5: truncation error ~h^2 and rounding ~1e-16 / h are both far
// below the 1e-7 tolerance, while a wrong derivative is off by O(1).
constexpr double kStep = 1e-5;
constexpr double kGradientTolerance = 1e-7;

TEST_CASE("kernels: reference<double> bias+activation(+dropout) gradients match finite differences") {
  auto ref = make_reference_kernels<double>();
  const int rows = 3, cols = 4;
  const std::size_t n = std::size_t(rows) * cols;
  auto z0 = uniform_vector<double>(n, 91, -2, 2);
  const auto bias = uniform_vector<double>(cols, 92, -0.5, 0.5);
  const auto weight = uniform_vector<double>(n, 93);  // dL/dout
  // Keep pre-activations away from ReLU's kink, where the derivative is undefined.
  for (std::size_t i = 0; i < n; ++i)
    if (std::abs(z0[i] + bias[i % cols]) < 0.1) z0[i] += 0.3;
  for (Activation act : kActivations) {
    for (const DropoutParams& dropout : {DropoutParams{}, DropoutParams{0.4f, 11, 5}}) {
      CAPTURE(activation_name(act));
      CAPTURE(dropout.p);
      // L(z0, bias) = sum weight * dropout(act(z0 + bias)).
      auto loss = [&](const std::vector<double>& z_in, const std::vector<double>& b) {
        std::vector<double> z = z_in, out(n);
        ref->bias_activation_forward(act, rows, cols, b.data(), z.data(), out.data(), dropout);
        double sum = 0.0;
        for (std::size_t i = 0; i < n; ++i) sum += weight[i] * out[i];
        return sum;
      };
      std::vector<double> z = z0, out(n), dz(n), dbias(cols);
      ref->bias_activation_forward(act, rows, cols, bias.data(), z.data(), out.data(), dropout);
      ref->activation_backward(act, rows, cols, z.data(), weight.data(), dz.data(), dbias.data(), dropout);
      for (std::size_t i = 0; i < n; ++i) {
        auto plus = z0, minus = z0;
        plus[i] += kStep, minus[i] -= kStep;
        const double numeric = (loss(plus, bias) - loss(minus, bias)) / (2 * kStep);
        CAPTURE(i);
        REQUIRE(std::abs(numeric - dz[i]) <= kGradientTolerance * std::max(1.0, std::abs(dz[i])));
      }
      for (int c = 0; c < cols; ++c) {
        auto plus = bias, minus = bias;
        plus[c] += kStep, minus[c] -= kStep;
        const double numeric = (loss(z0, plus) - loss(z0, minus)) / (2 * kStep);
        CAPTURE(c);
        REQUIRE(std::abs(numeric - dbias[c]) <= kGradientTolerance * std::max(1.0, std::abs(dbias[c])));
      }
    }
  }
}

TEST_CASE("kernels: reference<double> softmax cross-entropy gradient matches finite differences") {
  auto ref = make_reference_kernels<double>();
  const int rows = 4, classes = 5;
  const auto logits = uniform_vector<double>(std::size_t(rows) * classes, 94, -3, 3);
  const auto labels = random_labels(rows, classes, 95);
  const double grad_scale = 1.0 / rows;  // the mean over the batch
  for (float smoothing : {0.0f, 0.1f}) {
    CAPTURE(smoothing);
    auto loss = [&](const std::vector<double>& z) {
      return grad_scale *
             ref->softmax_cross_entropy(rows, classes, z.data(), labels.data(), smoothing, grad_scale, nullptr)
                 .loss_sum;
    };
    std::vector<double> dlogits(logits.size());
    ref->softmax_cross_entropy(rows, classes, logits.data(), labels.data(), smoothing, grad_scale, dlogits.data());
    for (std::size_t i = 0; i < logits.size(); ++i) {
      auto plus = logits, minus = logits;
      plus[i] += kStep, minus[i] -= kStep;
      const double numeric = (loss(plus) - loss(minus)) / (2 * kStep);
      CAPTURE(i);
      REQUIRE(std::abs(numeric - dlogits[i]) <= kGradientTolerance * std::max(1.0, std::abs(dlogits[i])));
    }
  }
}

}  // namespace

// ---- the tanh form of GELU (what cuBLASLt's GELU epilogues compute) -------------------------

TEST_CASE("kernels: gelu_tanh at known points and its derivative against finite differences") {
  // torch.nn.functional.gelu(x, approximate='tanh') in float64.
  CHECK(gelu_tanh(1.0) == doctest::Approx(0.8411919906082768).epsilon(1e-15));
  CHECK(gelu_tanh(-1.0) == doctest::Approx(-0.15880800939172324).epsilon(1e-15));
  CHECK(gelu_tanh(2.5) == doctest::Approx(2.484915733910001).epsilon(1e-15));
  // It differs from the exact form (by at most about 5e-4): the two are not interchangeable.
  CHECK(std::abs(gelu_tanh(1.0) - gelu(1.0)) > 1e-4);
  for (double x = -4.0; x <= 4.0; x += 0.37) {
    const double h = 1e-6;
    const double numeric = (gelu_tanh(x + h) - gelu_tanh(x - h)) / (2 * h);
    CAPTURE(x);
    CHECK(gelu_tanh_derivative(x) == doctest::Approx(numeric).epsilon(1e-8));
  }
}
