// The transformer's CUDA kernels (kernels/cuda/transformer_kernels.h) against the plain-loop CPU
// reference (kernels/cpu/transformer_ops.h), forward and backward, on fresh random inputs each run
// and on shapes that are no multiples of the kernels' tiles (odd T, odd C, a head size of 5).
//
// Bounds, in scaled_error (the largest error over the largest magnitude of the result): the
// reference runs in double, the kernels in fp32, whose every operation rounds by up to 2^-24
// (6e-8). The sums here have at most a few hundred terms, whose rounding errors add up like a
// random walk: well under 1e-6 of the result's scale (the most seen, running these kernels on a
// CPU emulation of the GPU, was 7e-7, attention's forward). 1e-5 leaves a margin of ten for the
// GPU's own expf, erff and fused multiply-adds, while a wrong index, mask or rescaling gives
// errors of order 1e-2 to 1. Where a kernel does the reference's float operations in its order
// (the embedding, the residual add), fp32 results must be bit-identical to the reference run in
// float. bf16 results: one rounding of the output, at most 2^-8 relative.
//
// Backward passes add into their gradients: each is checked from zero, then once more onto its
// own result (which must double it, up to one rounding), and twice from zero for bit-identical
// results (no atomics anywhere).
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/cpu/reference_kernels.h"
#include "kernels/cpu/transformer_ops.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/transformer_kernels.h"
#include "kernels/positions_by_token.h"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;
using cuda::DeviceBuffer;
using bf16 = __nv_bfloat16;

constexpr double kFp32Bound = 1e-5;
constexpr double kBf16Bound = 4e-3;     // one rounding to bf16 (2^-8) and the float math before it
constexpr double kDoubledBound = 1e-6;  // x + x in fp32 (exact) or fused with the last product

std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
std::vector<double> to_double(const std::vector<bf16>& x) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = __bfloat162float(x[i]);
  return out;
}
std::vector<float> as_float(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }
std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = __float2bfloat16_rn(x[i]);
  return out;
}
std::vector<double> doubled(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = 2.0 * x[i];
  return out;
}
template <typename T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
std::vector<std::int32_t> random_tokens(std::size_t n, int V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(V));
  return tokens;
}
void zero(DeviceBuffer<float>& buffer, std::size_t n) { CUDA_CHECK(cudaMemset(buffer.data(), 0, n * sizeof(float))); }

// ---- embedding ---------------------------------------------------------------------------------

TEST_CASE("cuda transformer: embedding forward and backward are bit-identical to the fp32 reference" *
          doctest::skip(no_gpu())) {
  struct Shape {
    int B, T, C, V;
  };
  // V small against B*T: most tokens repeat, and some rows of dwte get none.
  for (const Shape s : {Shape{2, 37, 64, 50}, Shape{3, 300, 40, 700}, Shape{1, 5, 3, 4}}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.T);
    const std::size_t rows = std::size_t(s.B) * s.T;
    const auto tokens = random_tokens(rows, s.V, seed);
    const auto wte = uniform<float>(std::size_t(s.V) * s.C, seed + 1);
    const auto wpe = uniform<float>(std::size_t(s.T) * s.C, seed + 2);
    const auto dout = uniform<float>(rows * s.C, seed + 3);
    // The gradients start from nonzero values: the kernels add to them.
    auto dwte = uniform<float>(wte.size(), seed + 4), dwpe = uniform<float>(wpe.size(), seed + 5);
    auto d_tokens = to_device(tokens);
    auto d_wte = to_device(wte), d_wpe = to_device(wpe), d_dout = to_device(dout);
    auto d_dwte = to_device(dwte), d_dwpe = to_device(dwpe);
    DeviceBuffer<float> d_out(rows * s.C);
    cuda::embedding_forward(s.B, s.T, s.C, d_tokens.data(), d_wte.data(), d_wpe.data(), d_out.data(), nullptr);
    kernels::PositionsByToken by_token;
    std::vector<std::int32_t> counts;
    kernels::group_positions_by_token(tokens.data(), tokens.size(), s.V, by_token, counts);
    auto d_list = to_device(by_token.tokens), d_starts = to_device(by_token.starts),
         d_positions = to_device(by_token.positions);
    const cuda::TokenPositions positions{d_list.data(), d_starts.data(), d_positions.data(),
                                         static_cast<int>(by_token.tokens.size())};
    cuda::embedding_backward(s.B, s.T, s.C, positions, d_dout.data(), d_dwte.data(), d_dwpe.data(), nullptr);
    std::vector<float> out(rows * s.C);
    kernels::embedding_forward(s.B, s.T, s.C, tokens.data(), wte.data(), wpe.data(), out.data());
    kernels::embedding_backward(s.B, s.T, s.C, tokens.data(), dout.data(), dwte.data(), dwpe.data());
    CHECK(bit_identical(to_host(d_out.data(), out.size()), out));
    CHECK(bit_identical(to_host(d_dwte.data(), dwte.size()), dwte));
    CHECK(bit_identical(to_host(d_dwpe.data(), dwpe.size()), dwpe));
  }
}

// ---- LayerNorm ---------------------------------------------------------------------------------

struct LayerNormShape {
  int rows, C;
};
// 74 = B*T for B=2, T=37; 600 rows span three chunks of the dweight/dbias partial sums; C=37 is
// no multiple of the warp.
constexpr LayerNormShape kLayerNormShapes[] = {{74, 64}, {74, 37}, {600, 768}, {3, 1}};

TEST_CASE("cuda transformer: layernorm_forward matches the reference (out, mean, rstd)" * doctest::skip(no_gpu())) {
  for (const LayerNormShape s : kLayerNormShapes) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.rows);
    CAPTURE(s.C);
    const std::size_t n = std::size_t(s.rows) * s.C;
    // An offset mean (x in [-1, 3]): the variance must not come from E[x^2] - E[x]^2.
    const auto x = uniform<float>(n, seed, -1.0, 3.0);
    const auto weight = uniform<float>(s.C, seed + 1), bias = uniform<float>(s.C, seed + 2);
    std::vector<double> out(n), mean(s.rows), rstd(s.rows);
    kernels::layernorm_forward(s.rows, s.C, to_double(x).data(), to_double(weight).data(), to_double(bias).data(),
                               out.data(), mean.data(), rstd.data());
    auto d_x = to_device(x), d_weight = to_device(weight), d_bias = to_device(bias);
    DeviceBuffer<float> d_out(n), d_mean(s.rows), d_rstd(s.rows);
    cuda::layernorm_forward(s.rows, s.C, d_x.data(), d_weight.data(), d_bias.data(), d_out.data(), d_mean.data(),
                            d_rstd.data(), nullptr);
    CHECK(scaled_error(to_host(d_out.data(), n), out) < kFp32Bound);
    CHECK(scaled_error(to_host(d_mean.data(), s.rows), mean) < kFp32Bound);
    CHECK(scaled_error(to_host(d_rstd.data(), s.rows), rstd) < kFp32Bound);
    // With the bf16 copy: the same out, and the copy cast writes of it.
    DeviceBuffer<float> d_out2(n);
    DeviceBuffer<__nv_bfloat16> copy(n), cast(n);
    cuda::layernorm_forward(s.rows, s.C, d_x.data(), d_weight.data(), d_bias.data(), d_out2.data(), d_mean.data(),
                            d_rstd.data(), nullptr, copy.data());
    cuda::cast(n, d_out.data(), cast.data(), nullptr);
    CHECK(bit_identical(to_host(d_out2.data(), n), to_host(d_out.data(), n)));
    CHECK(bit_identical(to_host(copy.data(), n), to_host(cast.data(), n)));
  }
}

TEST_CASE("cuda transformer: layernorm_backward matches the reference (dx, dweight, dbias), adds, is deterministic" *
          doctest::skip(no_gpu())) {
  for (const LayerNormShape s : kLayerNormShapes) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.rows);
    CAPTURE(s.C);
    const std::size_t n = std::size_t(s.rows) * s.C;
    const auto x = uniform<float>(n, seed, -1.0, 3.0);
    const auto weight = uniform<float>(s.C, seed + 1), bias = uniform<float>(s.C, seed + 2);
    const auto dout = uniform<float>(n, seed + 3);
    const auto xd = to_double(x), weight_d = to_double(weight), dout_d = to_double(dout);
    std::vector<double> out(n), mean(s.rows), rstd(s.rows), dx(n), dweight(s.C), dbias(s.C);
    kernels::layernorm_forward(s.rows, s.C, xd.data(), weight_d.data(), to_double(bias).data(), out.data(), mean.data(),
                               rstd.data());
    kernels::layernorm_backward(s.rows, s.C, xd.data(), weight_d.data(), mean.data(), rstd.data(), dout_d.data(),
                                dx.data(), dweight.data(), dbias.data());

    // The backward pass from the GPU forward's own mean and rstd, as a training step runs it.
    auto d_x = to_device(x), d_weight = to_device(weight), d_bias = to_device(bias), d_dout = to_device(dout);
    DeviceBuffer<float> d_out(n), d_mean(s.rows), d_rstd(s.rows), d_dx(n), d_dweight(s.C), d_dbias(s.C);
    DeviceBuffer<float> scratch(cuda::layernorm_backward_scratch_floats(s.rows, s.C));
    cuda::layernorm_forward(s.rows, s.C, d_x.data(), d_weight.data(), d_bias.data(), d_out.data(), d_mean.data(),
                            d_rstd.data(), nullptr);
    const auto backward = [&] {
      cuda::layernorm_backward(s.rows, s.C, d_x.data(), d_weight.data(), d_mean.data(), d_rstd.data(), d_dout.data(),
                               d_dx.data(), d_dweight.data(), d_dbias.data(), scratch.data(), nullptr);
    };
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 2; ++run) {
      zero(d_dx, n), zero(d_dweight, s.C), zero(d_dbias, s.C);
      backward();
      std::vector<std::vector<float>> got = {to_host(d_dx.data(), n), to_host(d_dweight.data(), s.C),
                                             to_host(d_dbias.data(), s.C)};
      if (run == 0) {
        CHECK(scaled_error(got[0], dx) < kFp32Bound);
        CHECK(scaled_error(got[1], dweight) < kFp32Bound);
        CHECK(scaled_error(got[2], dbias) < kFp32Bound);
        first = got;
      } else {
        for (int i = 0; i < 3; ++i) CHECK(bit_identical(got[i], first[i]));
      }
    }
    backward();  // onto the second run's result
    CHECK(scaled_error(to_host(d_dx.data(), n), doubled(first[0])) < kDoubledBound);
    CHECK(scaled_error(to_host(d_dweight.data(), s.C), doubled(first[1])) < kDoubledBound);
    CHECK(scaled_error(to_host(d_dbias.data(), s.C), doubled(first[2])) < kDoubledBound);
  }
}

// ---- residual and GELU -------------------------------------------------------------------------

TEST_CASE("cuda transformer: residual_forward (fp32 bit-identical, bf16 within one rounding, in place)" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const std::size_t n = 10007;
  const auto a = uniform<float>(n, seed), b = uniform<float>(n, seed + 1);
  std::vector<float> want(n);
  kernels::residual_forward(static_cast<std::int64_t>(n), a.data(), b.data(), want.data());
  auto d_a = to_device(a), d_b = to_device(b);
  cuda::residual_forward(n, d_a.data(), d_b.data(), d_a.data(), nullptr);  // out = a
  CHECK(bit_identical(to_host(d_a.data(), n), want));

  const auto a16 = to_bf16(a), b16 = to_bf16(b);
  std::vector<double> want16(n);
  kernels::residual_forward(static_cast<std::int64_t>(n), to_double(a16).data(), to_double(b16).data(), want16.data());
  auto d_a16 = to_device(a16), d_b16 = to_device(b16);
  DeviceBuffer<bf16> d_out16(n);
  cuda::residual_forward(n, d_a16.data(), d_b16.data(), d_out16.data(), nullptr);
  CHECK(scaled_error(to_double(to_host(d_out16.data(), n)), want16) < kBf16Bound);
}

template <typename T>
void check_gelu(double bound) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const std::size_t n = 10007;
  std::vector<T> x, dout;
  if constexpr (std::is_same_v<T, bf16>) {
    x = to_bf16(uniform<float>(n, seed, -6.0, 6.0)), dout = to_bf16(uniform<float>(n, seed + 1));
  } else {
    x = uniform<float>(n, seed, -6.0, 6.0), dout = uniform<float>(n, seed + 1);
  }
  const auto xd = to_double(x), dout_d = to_double(dout);
  std::vector<double> out(n), dx(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = kernels::gelu(xd[i]);
    dx[i] = dout_d[i] * kernels::gelu_derivative(xd[i]);
  }
  auto d_x = to_device(x), d_dout = to_device(dout);
  DeviceBuffer<T> d_out(n);
  cuda::gelu_forward(n, d_x.data(), d_out.data(), nullptr);
  CHECK(scaled_error(to_double(to_host(d_out.data(), n)), out) < bound);
  if constexpr (std::is_same_v<T, float>) {  // fp32 in, bf16 out: the fp32 result rounded, bit for bit
    DeviceBuffer<bf16> d_out16(n);
    cuda::gelu_forward(n, d_x.data(), d_out16.data(), nullptr);
    const auto got = to_host(d_out.data(), n);
    const auto got16 = to_host(d_out16.data(), n);
    std::size_t unrounded = 0;
    for (std::size_t i = 0; i < n; ++i)
      unrounded += std::bit_cast<std::uint16_t>(got16[i]) != std::bit_cast<std::uint16_t>(__float2bfloat16_rn(got[i]));
    CHECK(unrounded == 0);
  }
  cuda::gelu_backward(n, d_x.data(), d_dout.data(), d_dout.data(), nullptr);  // dx = dout, in place
  CHECK(scaled_error(to_double(to_host(d_dout.data(), n)), dx) < bound);
}

TEST_CASE("cuda transformer: GELU (exact erf) forward and backward, fp32 and bf16" * doctest::skip(no_gpu())) {
  check_gelu<float>(1e-6);  // a few operations, each within an ulp or two: no sums
  check_gelu<bf16>(kBf16Bound);
}

// ---- cross-entropy -----------------------------------------------------------------------------

TEST_CASE("cuda transformer: cross_entropy_forward_backward matches the reference (row losses, sum, dlogits)" *
          doctest::skip(no_gpu())) {
  auto ref = kernels::make_reference_kernels<double>();
  const int rows = 74;
  for (int V : {37, 1000, 50257}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(V);
    const auto logits = uniform<float>(std::size_t(rows) * V, seed, -8.0, 8.0);
    const auto targets = random_tokens(rows, V, seed + 1);
    const auto logits_d = to_double(logits);
    const double grad_scale = 1.0 / rows;
    std::vector<double> dlogits(logits.size()), row_loss(rows);
    const double loss_sum =
        ref->softmax_cross_entropy(rows, V, logits_d.data(), targets.data(), 0.0f, grad_scale, dlogits.data()).loss_sum;
    for (int r = 0; r < rows; ++r)
      row_loss[r] =
          ref->softmax_cross_entropy(1, V, logits_d.data() + std::size_t(r) * V, targets.data() + r, 0.0f, 1.0, nullptr)
              .loss_sum;

    auto d_logits = to_device(logits);
    auto d_targets = to_device(targets);
    DeviceBuffer<float> d_dlogits(logits.size()), d_row_loss(rows);
    DeviceBuffer<double> d_sum(1);
    cuda::cross_entropy_forward_backward(rows, V, d_logits.data(), d_targets.data(), static_cast<float>(grad_scale),
                                         d_dlogits.data(), d_row_loss.data(), d_sum.data(), nullptr);
    CHECK(scaled_error(to_host(d_row_loss.data(), rows), row_loss) < kFp32Bound);
    CHECK(to_host(d_sum.data(), 1)[0] == doctest::Approx(loss_sum).epsilon(kFp32Bound));
    const auto got = to_host(d_dlogits.data(), logits.size());
    CHECK(scaled_error(got, dlogits) < kFp32Bound);

    // A bf16 gradient (the head's product operand): the fp32 one rounded to nearest even, bit for bit.
    DeviceBuffer<bf16> d_dlogits16(logits.size());
    cuda::cross_entropy_forward_backward(rows, V, d_logits.data(), d_targets.data(), static_cast<float>(grad_scale),
                                         d_dlogits16.data(), d_row_loss.data(), d_sum.data(), nullptr);
    const auto got16 = to_host(d_dlogits16.data(), logits.size());
    std::size_t unrounded = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      unrounded += std::bit_cast<std::uint16_t>(got16[i]) != std::bit_cast<std::uint16_t>(__float2bfloat16_rn(got[i]));
    CHECK(unrounded == 0);

    // In place (dlogits = logits), as a head that keeps no copy of its logits runs it: the same bits.
    cuda::cross_entropy_forward_backward(rows, V, d_logits.data(), d_targets.data(), static_cast<float>(grad_scale),
                                         d_logits.data(), d_row_loss.data(), d_sum.data(), nullptr);
    CHECK(bit_identical(to_host(d_logits.data(), logits.size()), got));
  }
}

TEST_CASE("cuda transformer: cross_entropy_forward_backward gives NaN for a target outside the vocabulary" *
          doctest::skip(no_gpu())) {
  const int rows = 3, V = 5;
  auto d_logits = to_device(std::vector<float>(rows * V, 0.5f));
  auto d_targets = to_device(std::vector<std::int32_t>{0, V, 4});
  DeviceBuffer<float> d_dlogits(rows * V), d_row_loss(rows);
  DeviceBuffer<double> d_sum(1);
  cuda::cross_entropy_forward_backward(rows, V, d_logits.data(), d_targets.data(), 1.0f, d_dlogits.data(),
                                       d_row_loss.data(), d_sum.data(), nullptr);
  const auto row_loss = to_host(d_row_loss.data(), rows);
  CHECK(row_loss[0] == doctest::Approx(std::log(5.0)).epsilon(1e-6));
  CHECK(std::isnan(row_loss[1]));
  CHECK(std::isnan(to_host(d_sum.data(), 1)[0]));
  const auto dlogits = to_host(d_dlogits.data(), rows * V);
  CHECK(std::isnan(dlogits[V]));
  CHECK(!std::isnan(dlogits[0]));
}

TEST_CASE("cuda transformer: cross_entropy_forward_backward counts the rows whose target is the first arg-max" *
          doctest::skip(no_gpu())) {
  auto ref = kernels::make_reference_kernels<double>();
  const int rows = 74;
  for (int V : {37, 1000, 50257}) {
    for (bool ties : {false, true}) {
      const std::uint64_t seed = fresh_seed();
      CAPTURE(seed);
      CAPTURE(V);
      CAPTURE(ties);
      auto logits = uniform<float>(std::size_t(rows) * V, seed, -8.0, 8.0);
      // Whole numbers: the maximum repeats in most rows, and a target on a later copy is no hit.
      if (ties)
        for (auto& z : logits) z = std::floor(z);
      auto targets = random_tokens(rows, V, seed + 1);
      // A third on the first maximum (hits), a third on the last (a hit only where it is unique).
      for (int r = 0; r < rows; ++r) {
        const float* z = logits.data() + std::size_t(r) * V;
        const float max = *std::max_element(z, z + V);
        if (r % 3 == 0) targets[r] = static_cast<std::int32_t>(std::find(z, z + V, max) - z);
        if (r % 3 == 1) {
          int last = V - 1;
          while (z[last] != max) --last;
          targets[r] = last;
        }
      }
      targets[rows - 1] = V;  // outside the vocabulary: no hit (and a NaN loss)
      const long long want =
          ref->softmax_cross_entropy(rows - 1, V, to_double(logits).data(), targets.data(), 0.0f, 1.0, nullptr).correct;
      CHECK(want >= rows / 3);

      auto d_logits = to_device(logits);
      auto d_targets = to_device(targets);
      DeviceBuffer<float> d_dlogits(logits.size()), d_row_loss(rows);
      DeviceBuffer<double> d_sum(1);
      DeviceBuffer<int> d_row_hit(rows);
      DeviceBuffer<long long> d_hits(1);
      const auto run = [&](cuda::ArgmaxHits hits) {
        cuda::cross_entropy_forward_backward(rows, V, d_logits.data(), d_targets.data(), 1.0f / rows, d_dlogits.data(),
                                             d_row_loss.data(), d_sum.data(), nullptr, hits);
        return std::vector<std::vector<float>>{to_host(d_dlogits.data(), logits.size()),
                                               to_host(d_row_loss.data(), rows)};
      };
      const auto without = run({});
      const auto with = run({d_row_hit.data(), d_hits.data()});
      CHECK(to_host(d_hits.data(), 1)[0] == want);
      // Counting changes nothing else.
      CHECK(bit_identical(with[0], without[0]));
      CHECK(bit_identical(with[1], without[1]));
    }
  }
  DeviceBuffer<float> buffer(1);
  DeviceBuffer<std::int32_t> target(1);
  DeviceBuffer<double> sum(1);
  DeviceBuffer<int> row_hit(1);
  DeviceBuffer<long long> hits(1);
  CUDA_CHECK(cudaMemset(hits.data(), 0xff, sizeof(long long)));
  float* no_dlogits = nullptr;
  cuda::cross_entropy_forward_backward(0, 5, buffer.data(), target.data(), 1.0f, no_dlogits, buffer.data(), sum.data(),
                                       nullptr, {row_hit.data(), hits.data()});
  CHECK(to_host(hits.data(), 1)[0] == 0);  // no rows: a count of 0, written
  CHECK_THROWS_AS(cuda::cross_entropy_forward_backward(1, 5, buffer.data(), target.data(), 1.0f, no_dlogits,
                                                       buffer.data(), sum.data(), nullptr, {nullptr, hits.data()}),
                  std::invalid_argument);  // a count needs its row scratch
}

// ---- attention ---------------------------------------------------------------------------------

struct AttentionShape {
  int B, T, C, H;
};
// Head sizes 16, 128 (the largest), 48 and 5 (not multiples of the warp); T odd, below one block
// of queries (5), and across several key tiles with a remainder (130).
constexpr AttentionShape kAttentionShapes[] = {
    {2, 37, 64, 4}, {2, 37, 256, 2}, {1, 130, 128, 1}, {2, 5, 96, 2}, {3, 45, 40, 8}};

// The per-row log-sum-exp of the scaled causal scores, in double: what the forward kernel keeps.
std::vector<double> reference_logsumexp(const AttentionShape& s, const std::vector<double>& qkv) {
  const int hs = s.C / s.H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> lse(std::size_t(s.B) * s.H * s.T), scores(s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        const double* q = qkv.data() + (std::size_t(b) * s.T + t) * 3 * s.C + h * hs;
        double max = -std::numeric_limits<double>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          const double* k = qkv.data() + (std::size_t(b) * s.T + t2) * 3 * s.C + s.C + h * hs;
          double dot = 0;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          scores[t2] = dot * scale;
          max = std::max(max, scores[t2]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += std::exp(scores[t2] - max);
        lse[(std::size_t(b) * s.H + h) * s.T + t] = max + std::log(sum);
      }
  return lse;
}

TEST_CASE("cuda transformer: attention_forward matches the reference (out, logsumexp)" * doctest::skip(no_gpu())) {
  for (const AttentionShape s : kAttentionShapes) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.H);
    const std::size_t rows = std::size_t(s.B) * s.T;
    // [-2, 2]: scores of a few units, so that the running maximum changes between key tiles.
    const auto qkv = uniform<float>(rows * 3 * s.C, seed, -2.0, 2.0);
    const auto qkv_d = to_double(qkv);
    std::vector<double> out(rows * s.C), probs(std::size_t(s.B) * s.H * s.T * s.T);
    kernels::attention_forward(s.B, s.T, s.C, s.H, qkv_d.data(), out.data(), probs.data());
    auto d_qkv = to_device(qkv);
    DeviceBuffer<float> d_out(out.size()), d_lse(std::size_t(s.B) * s.H * s.T);
    cuda::attention_forward(s.B, s.T, s.C, s.H, d_qkv.data(), d_out.data(), d_lse.data(), nullptr);
    CHECK(scaled_error(to_host(d_out.data(), out.size()), out) < kFp32Bound);
    CHECK(scaled_error(to_host(d_lse.data(), d_lse.size()), reference_logsumexp(s, qkv_d)) < kFp32Bound);
  }
}

TEST_CASE("cuda transformer: attention_backward matches the reference (dq, dk, dv), adds, is deterministic" *
          doctest::skip(no_gpu())) {
  for (const AttentionShape s : kAttentionShapes) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.H);
    const std::size_t rows = std::size_t(s.B) * s.T, heads_rows = std::size_t(s.B) * s.H * s.T;
    const auto qkv = uniform<float>(rows * 3 * s.C, seed, -2.0, 2.0);
    const auto dout = uniform<float>(rows * s.C, seed + 1);
    const auto qkv_d = to_double(qkv);
    std::vector<double> out(rows * s.C), probs(heads_rows * s.T), dqkv(qkv.size());
    kernels::attention_forward(s.B, s.T, s.C, s.H, qkv_d.data(), out.data(), probs.data());
    kernels::attention_backward(s.B, s.T, s.C, s.H, qkv_d.data(), probs.data(), to_double(dout).data(), dqkv.data());

    // From the GPU forward's own out and logsumexp, as a training step runs it.
    auto d_qkv = to_device(qkv), d_dout = to_device(dout);
    DeviceBuffer<float> d_out(out.size()), d_lse(heads_rows), d_dqkv(qkv.size()), scratch(heads_rows);
    cuda::attention_forward(s.B, s.T, s.C, s.H, d_qkv.data(), d_out.data(), d_lse.data(), nullptr);
    const auto backward = [&] {
      cuda::attention_backward(s.B, s.T, s.C, s.H, d_qkv.data(), d_out.data(), d_dout.data(), d_lse.data(),
                               d_dqkv.data(), scratch.data(), nullptr);
    };
    zero(d_dqkv, qkv.size());
    backward();
    const auto first = to_host(d_dqkv.data(), qkv.size());
    CHECK(scaled_error(first, dqkv) < kFp32Bound);
    zero(d_dqkv, qkv.size());
    backward();
    CHECK(bit_identical(to_host(d_dqkv.data(), qkv.size()), first));
    backward();  // onto the second run's result
    CHECK(scaled_error(to_host(d_dqkv.data(), qkv.size()), doubled(first)) < kDoubledBound);
  }
}

TEST_CASE("cuda transformer: attention refuses a head size above the largest it takes, and C not a multiple of H" *
          doctest::skip(no_gpu())) {
  DeviceBuffer<float> buffer(1);
  CHECK_THROWS_AS(cuda::attention_forward(1, 4, 2 * (cuda::kMaxAttentionHeadSize + 1), 2, buffer.data(), buffer.data(),
                                          buffer.data(), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::attention_backward(1, 4, 66, 4, buffer.data(), buffer.data(), buffer.data(), buffer.data(),
                                           buffer.data(), buffer.data(), nullptr),
                  std::invalid_argument);
}

}  // namespace

// ---- column sums --------------------------------------------------------------------------------

TEST_CASE("cuda transformer: column_sums matches double sums, overwrites, and repeats bit for bit" *
          doctest::skip(no_gpu())) {
  struct Shape {
    int rows, cols;
  };
  // One row, a chunk less one, one chunk, several with a remainder; one column to 4C of GPT-2.
  for (const Shape s : {Shape{1, 7}, Shape{127, 33}, Shape{128, 1}, Shape{1000, 3072}, Shape{8192, 768}}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.rows);
    CAPTURE(s.cols);
    const auto x = uniform<float>(std::size_t(s.rows) * s.cols, seed);
    std::vector<double> want(s.cols, 0.0);
    for (int r = 0; r < s.rows; ++r)
      for (int c = 0; c < s.cols; ++c) want[c] += x[std::size_t(r) * s.cols + c];
    auto d_x = to_device(x);
    DeviceBuffer<float> out(s.cols), scratch(cuda::column_sums_scratch_floats(s.rows, s.cols));
    CUDA_CHECK(cudaMemset(out.data(), 0x7f, s.cols * sizeof(float)));  // overwritten, not added to
    cuda::column_sums(s.rows, s.cols, d_x.data(), out.data(), scratch.data(), nullptr);
    const auto first = to_host(out.data(), s.cols);
    // Sums of up to 8192 terms of [-1, 1] in fp32: well under 1e-5 of the largest sum's scale.
    CHECK(scaled_error(first, want) < 1e-5);
    cuda::column_sums(s.rows, s.cols, d_x.data(), out.data(), scratch.data(), nullptr);
    CHECK(bit_identical(to_host(out.data(), s.cols), first));
    // With the bf16 copy: the same sums, and the copy cast writes.
    const std::size_t n = std::size_t(s.rows) * s.cols;
    DeviceBuffer<__nv_bfloat16> copy(n), cast(n);
    cuda::column_sums(s.rows, s.cols, d_x.data(), out.data(), scratch.data(), nullptr, copy.data());
    cuda::cast(n, d_x.data(), cast.data(), nullptr);
    CHECK(bit_identical(to_host(out.data(), s.cols), first));
    CHECK(bit_identical(to_host(copy.data(), n), to_host(cast.data(), n)));
  }
}

TEST_CASE("cuda transformer: gelu_backward_sums gives the bits of gelu_backward then column_sums" *
          doctest::skip(no_gpu())) {
  struct Shape {
    int rows, cols;
  };
  // A partial chunk of rows; GPT-2's MLP at 8 x 1024 tokens.
  for (const Shape s : {Shape{300, 70}, Shape{8192, 3072}}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.rows);
    const std::size_t n = std::size_t(s.rows) * s.cols;
    auto d_x = to_device(uniform<float>(n, seed, -4, 4)), d_dout = to_device(uniform<float>(n, seed + 1));
    DeviceBuffer<float> dx_two(n), sums_two(s.cols), sums_one(s.cols);
    DeviceBuffer<float> scratch(cuda::column_sums_scratch_floats(s.rows, s.cols));
    DeviceBuffer<__nv_bfloat16> copy_two(n), copy_one(n);
    cuda::gelu_backward<float>(n, d_x.data(), d_dout.data(), dx_two.data(), nullptr);
    cuda::column_sums(s.rows, s.cols, dx_two.data(), sums_two.data(), scratch.data(), nullptr, copy_two.data());
    // In place, as the GPT step runs it: dx is dout.
    cuda::gelu_backward_sums(s.rows, s.cols, d_x.data(), d_dout.data(), d_dout.data(), sums_one.data(), scratch.data(),
                             nullptr, copy_one.data());
    CHECK(bit_identical(to_host(d_dout.data(), n), to_host(dx_two.data(), n)));
    CHECK(bit_identical(to_host(sums_one.data(), s.cols), to_host(sums_two.data(), s.cols)));
    CHECK(bit_identical(to_host(copy_one.data(), n), to_host(copy_two.data(), n)));
  }
}
