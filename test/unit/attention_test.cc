// Causal attention: the product-based CPU version (kernels/cpu/attention_gemm.h) against the
// plain-loop reference (kernels/cpu/transformer_ops.h) run in double precision.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_gemm.h"
#include "kernels/cpu/transformer_ops.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"

using namespace slurm_train;

namespace {

std::vector<float> random_values(std::size_t n, std::uint64_t seed, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (2 * kernels::uniform_from_counter(seed, i, 0) - 1);
  return v;
}

double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("attention: products and the softmax between them match the reference loops, forward and backward") {
  for (const auto [B, T, C, H] : {std::array{2, 7, 12, 3}, std::array{1, 33, 32, 4}, std::array{3, 1, 8, 2},
                                  std::array{1, 150, 16, 2}}) {  // blocks of 64 rows, the last partial
    CAPTURE(T);
    const std::size_t nqkv = static_cast<std::size_t>(B) * T * 3 * C, nout = static_cast<std::size_t>(B) * T * C,
                      nprobs = static_cast<std::size_t>(B) * H * T * T;
    // Scores of a few units, so that the softmax is far from uniform.
    const auto qkv = random_values(nqkv, 1, 2.0f), dout = random_values(nout, 2, 1.0f);
    auto k = kernels::make_cpu_kernels(1);
    std::vector<float> out(nout), probs(nprobs, 7.0f), dqkv(nqkv, 7.0f), scratch;  // both overwritten
    kernels::attention_forward_gemm(*k, B, T, C, H, qkv.data(), out.data(), probs.data());
    kernels::attention_backward_gemm(*k, B, T, C, H, qkv.data(), probs.data(), dout.data(), dqkv.data(), scratch);

    const std::vector<double> qkv64(qkv.begin(), qkv.end()), dout64(dout.begin(), dout.end());
    std::vector<double> out64(nout), probs64(nprobs), dqkv64(nqkv, 0.0);
    kernels::attention_forward(B, T, C, H, qkv64.data(), out64.data(), probs64.data());
    kernels::attention_backward(B, T, C, H, qkv64.data(), probs64.data(), dout64.data(), dqkv64.data());
    CHECK(relative_error(out, out64) < 1e-6);
    CHECK(relative_error(probs, probs64) < 1e-6);
    CHECK(relative_error(dqkv, dqkv64) < 1e-5);
    // Causal: nothing above the diagonal, each row sums to 1.
    for (int bh = 0; bh < B * H; ++bh)
      for (int t = 0; t < T; ++t) {
        double sum = 0;
        for (int t2 = 0; t2 < T; ++t2) {
          const float p = probs[(static_cast<std::size_t>(bh) * T + t) * T + t2];
          if (t2 > t) CHECK(p == 0.0f);
          sum += p;
        }
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
      }
  }
}

TEST_CASE("attention: the scores the products compute are the causal triangle rounded out to blocks of 64 queries") {
  CHECK(kernels::attention_scores_computed(1) == 1);
  CHECK(kernels::attention_scores_computed(64) == 64 * 64);
  CHECK(kernels::attention_scores_computed(128) == 64 * 64 + 64 * 128);
  CHECK(kernels::attention_scores_computed(150) == 64 * 64 + 64 * 128 + 22 * 150);
  for (int T : {1, 63, 64, 65, 1024}) {
    CAPTURE(T);
    CHECK(kernels::attention_scores_computed(T) >= static_cast<std::int64_t>(T) * (T + 1) / 2);
    CHECK(kernels::attention_scores_computed(T) <= static_cast<std::int64_t>(T) * T);
  }
}
