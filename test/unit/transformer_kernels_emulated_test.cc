// The transformer kernels' device code (kernels/cuda/transformer_kernels_device.cuh) on the CPU
// emulation of CUDA's execution model (cuda_emulation.h), with the grids and blocks their host
// launchers in transformer_kernels.cu use, against the plain-loop reference in double: the
// embedding and its backward (bit for bit against the reference in float), the cross-entropy's loss, gradient and
// arg-max hits (ties included), the decoder's attention of one query over a cache, the chunked column sums, LayerNorm,
// and the fused fp32 attention forward and backward. fp32 results within 1e-5 of the result's scale (as test/cuda/,
// where the GPU runs the same code); the emulation tests the kernels' logic, not the GPU.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

// First: the device code below is compiled against the emulation.
#include "test/unit/cuda_emulation.h"

#include "kernels/cpu/transformer_ops.h"
#include "kernels/cuda/transformer_kernels_device.cuh"
#include "kernels/positions_by_token.h"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train::cuda_test;
using namespace slurm_train::cuda::transformer_detail;
using slurm_train::cuda::kColumnSumChunkRows;
using slurm_train::cuda::kLayerNormChunkRows;

// The column sums' blocks: 32 columns, kSumGroups row groups.
const cuda_emu::Index kSumBlock{32, kSumGroups, 1};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

unsigned blocks(long long n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

}  // namespace

TEST_CASE("transformer kernels (emulated): embedding forward and backward, as the float reference bit for bit") {
  const int B = 3, T = 70, C = 20, V = 11;  // 210 positions; tokens 9 and 10 are in none of them
  std::vector<std::int32_t> tokens(std::size_t(B) * T);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + i / 5) % (V - 2));
  const auto wte = uniform<float>(std::size_t(V) * C, 11), wpe = uniform<float>(std::size_t(T) * C, 12),
             dout = uniform<float>(tokens.size() * C, 13), dwte0 = uniform<float>(std::size_t(V) * C, 14),
             dwpe0 = uniform<float>(std::size_t(T) * C, 15);
  const std::size_t n = tokens.size() * C;
  std::vector<float> out(n), dwte = dwte0, dwpe = dwpe0;
  cuda_emu::launch({3, 1, 1}, kThreads, 0, embedding_forward_kernel, T, C, n, tokens.data(), wte.data(), wpe.data(),
                   out.data());
  slurm_train::kernels::PositionsByToken by_token;
  std::vector<std::int32_t> counts;
  slurm_train::kernels::group_positions_by_token(tokens.data(), tokens.size(), V, by_token, counts);
  cuda_emu::launch({static_cast<unsigned>(by_token.tokens.size()), 1, 1}, kThreads, 0, embedding_dwte_kernel, C,
                   static_cast<const std::int32_t*>(by_token.tokens.data()),
                   static_cast<const std::int32_t*>(by_token.starts.data()),
                   static_cast<const std::int32_t*>(by_token.positions.data()), dout.data(), dwte.data());
  cuda_emu::launch({2, 1, 1}, kThreads, 0, embedding_dwpe_kernel, B, T, C, dout.data(), dwpe.data());
  std::vector<float> want(n), want_dwte = dwte0, want_dwpe = dwpe0;
  slurm_train::kernels::embedding_forward(B, T, C, tokens.data(), wte.data(), wpe.data(), want.data());
  slurm_train::kernels::embedding_backward(B, T, C, tokens.data(), dout.data(), want_dwte.data(), want_dwpe.data());
  CHECK(out == want);
  CHECK(dwte == want_dwte);
  CHECK(dwpe == want_dwpe);
}

TEST_CASE("transformer kernels (emulated): cross-entropy's loss, gradient and first-arg-max hits, ties included") {
  for (const int V : {37, 300}) {
    CAPTURE(V);
    const int rows = 24;
    std::mt19937_64 rng(V);
    std::vector<float> logits(static_cast<std::size_t>(rows) * V);
    std::vector<std::int32_t> targets(rows);
    for (int r = 0; r < rows; ++r) {
      float* z = logits.data() + static_cast<std::size_t>(r) * V;
      // Odd rows: whole numbers in [0, 3], so the maximum repeats.
      for (int c = 0; c < V; ++c)
        z[c] = r % 2 ? static_cast<float>(rng() % 4) : std::uniform_real_distribution<float>(-3, 3)(rng);
      const int first = static_cast<int>(std::max_element(z, z + V) - z);
      int last = first;
      for (int c = 0; c < V; ++c)
        if (z[c] == z[first]) last = c;
      targets[r] = r % 3 == 0 ? first : r % 3 == 1 ? last : static_cast<int>(rng() % V);
    }
    const float scale = 0.25f;
    std::vector<float> dlogits(logits.size()), row_loss(rows);
    std::vector<int> row_hit(rows, -1);
    double loss_sum = 0;
    long long hits = -1;
    cuda_emu::launch({static_cast<unsigned>(rows), 1, 1}, kThreads, 0, cross_entropy_kernel<float>, V, logits.data(),
                     targets.data(), scale, dlogits.data(), row_loss.data(), row_hit.data());
    // The bf16 gradient: the fp32 one rounded (to nearest even), the loss and hits the same bits.
    std::vector<bf16> dlogits16(logits.size());
    std::vector<float> row_loss16(rows);
    std::vector<int> row_hit16(rows, -1);
    cuda_emu::launch({static_cast<unsigned>(rows), 1, 1}, kThreads, 0, cross_entropy_kernel<bf16>, V, logits.data(),
                     targets.data(), scale, dlogits16.data(), row_loss16.data(), row_hit16.data());
    bool rounded = true;
    for (std::size_t i = 0; i < dlogits.size(); ++i)
      rounded = rounded && std::bit_cast<std::uint16_t>(dlogits16[i]) ==
                               std::bit_cast<std::uint16_t>(__float2bfloat16_rn(dlogits[i]));
    CHECK(rounded);
    CHECK(row_loss16 == row_loss);
    CHECK(row_hit16 == row_hit);
    cuda_emu::launch({1, 1, 1}, kThreads, 0, sum_rows_kernel, rows, row_loss.data(), &loss_sum,
                     static_cast<const int*>(row_hit.data()), &hits);
    std::vector<double> want_loss(rows), want_d(logits.size());
    long long want_hits = 0;
    double want_sum = 0;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits.data() + static_cast<std::size_t>(r) * V;
      const double max = *std::max_element(z, z + V);
      double sum = 0;
      for (int c = 0; c < V; ++c) sum += std::exp(z[c] - max);
      want_loss[r] = std::log(sum) - (z[targets[r]] - max);
      want_sum += want_loss[r];
      for (int c = 0; c < V; ++c)
        want_d[static_cast<std::size_t>(r) * V + c] = (std::exp(z[c] - max) / sum - (c == targets[r])) * scale;
      want_hits += std::max_element(z, z + V) - z == targets[r];
    }
    CHECK(scaled_error(row_loss, want_loss) < 1e-5);
    CHECK(scaled_error(dlogits, want_d) < 1e-5);
    CHECK(std::abs(loss_sum - want_sum) < 1e-5 * std::abs(want_sum));
    CHECK(hits == want_hits);
    CHECK(want_hits > rows / 3);  // the first-max targets, and the last-max ones where the max is unique
    CHECK(want_hits < rows);      // and not every row: the tied rows' last-max targets are misses
  }
  // A target outside [0, V): a NaN loss, a NaN gradient row, and no hit.
  std::vector<float> z{1.0f, 2.0f, 3.0f}, dz(3), loss(1);
  std::vector<std::int32_t> bad{3};
  std::vector<int> hit{7};
  cuda_emu::launch({1, 1, 1}, kThreads, 0, cross_entropy_kernel<float>, 3, z.data(), bad.data(), 1.0f, dz.data(),
                   loss.data(), hit.data());
  CHECK(std::isnan(loss[0]));
  CHECK(std::isnan(dz[2]));
  CHECK(hit[0] == 0);
}

TEST_CASE("transformer kernels (emulated): GELU four values at a time gives the one-at-a-time kernels' bits") {
  // Whole quads over a grid that strides, and a tail of 2; in place for the gradient, as the step runs it.
  const std::size_t n = 4 * 250 + 2;
  const auto x = uniform<float>(n, 21, -6.0f, 6.0f);
  const auto dout = uniform<float>(n, 22, -1.0f, 1.0f);
  const auto same16 = [](const std::vector<bf16>& a, const std::vector<bf16>& b) {
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      differ += std::bit_cast<std::uint16_t>(a[i]) != std::bit_cast<std::uint16_t>(b[i]);
    return differ;
  };
  std::vector<float> one(n), four(n);
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_forward_kernel<float, float>, n, x.data(), one.data());
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_forward_x4_kernel<float, float>, n, x.data(), four.data());
  CHECK(four == one);
  std::vector<bf16> one16(n), four16(n);
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_forward_kernel<float, bf16>, n, x.data(), one16.data());
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_forward_x4_kernel<float, bf16>, n, x.data(), four16.data());
  CHECK(same16(one16, four16) == 0);
  std::vector<float> dx_one = dout, dx_four = dout;
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_backward_kernel<float>, n, x.data(), static_cast<const float*>(dx_one.data()),
                   dx_one.data());
  cuda_emu::launch({2, 1, 1}, 64, 0, gelu_backward_x4_kernel<float>, n, x.data(),
                   static_cast<const float*>(dx_four.data()), dx_four.data());
  CHECK(dx_four == dx_one);
  CHECK(dx_one != dout);
}

TEST_CASE("transformer kernels (emulated): attention_decode, one query over a cache, head size 24") {
  const int C = 72, H = 3, hs = C / H, positions = 37;
  const auto q = uniform<float>(C, 1, -2, 2), keys = uniform<float>(std::size_t(positions) * C, 2, -2, 2),
             values = uniform<float>(std::size_t(positions) * C, 3);
  std::vector<float> out(C), scores(std::size_t(H) * positions);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  cuda_emu::launch({H, 1, 1}, kThreads, 0, attention_decode_kernel, C, positions, hs, scale, q.data(), keys.data(),
                   values.data(), out.data(), scores.data());
  std::vector<double> want(C);
  for (int h = 0; h < H; ++h) {
    std::vector<double> s(positions);
    double max = -1e300, sum = 0;
    for (int t = 0; t < positions; ++t) {
      double dot = 0;
      for (int i = 0; i < hs; ++i) dot += double(q[h * hs + i]) * keys[std::size_t(t) * C + h * hs + i];
      s[t] = dot / std::sqrt(double(hs));
      max = std::max(max, s[t]);
    }
    for (double& x : s) sum += x = std::exp(x - max);
    for (int i = 0; i < hs; ++i) {
      double o = 0;
      for (int t = 0; t < positions; ++t) o += s[t] / sum * values[std::size_t(t) * C + h * hs + i];
      want[h * hs + i] = o;
    }
  }
  CHECK(scaled_error(out, want) < 1e-5);
}

TEST_CASE(
    "transformer kernels (emulated): column sums over chunks of rows, a partial last chunk, with and without "
    "the bf16 copy") {
  const int rows = 9 * kColumnSumChunkRows + 5, cols = 40;  // more chunks than row groups, a partial block of columns
  const std::size_t n = std::size_t(rows) * cols;
  const auto x = uniform<float>(n, 4);
  const unsigned chunks = blocks(rows, kColumnSumChunkRows);
  std::vector<double> want(cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[c] += x[std::size_t(r) * cols + c];
  for (const bool with_copy : {false, true}) {
    CAPTURE(with_copy);
    std::vector<float> partial(std::size_t(chunks) * cols), out(cols, 1e30f);
    std::vector<__nv_bfloat16> copy(n, __float2bfloat16(-7.0f));
    cuda_emu::launch({blocks(cols, 32), chunks, 1}, kSumBlock, 0, column_partials_kernel<false>, rows, cols, x.data(),
                     static_cast<const float*>(nullptr), static_cast<float*>(nullptr), partial.data(),
                     with_copy ? copy.data() : nullptr);
    cuda_emu::launch({blocks(cols, 32), 1, 1}, kSumBlock, 0, column_chunk_sums_kernel, static_cast<int>(chunks), cols,
                     static_cast<const float*>(partial.data()), out.data());
    CHECK(scaled_error(out, want) < 1e-5);
    // The copy: every value rounded to nearest even, as cast writes it; untouched without one.
    std::size_t same = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const __nv_bfloat16 expected = with_copy ? __float2bfloat16_rn(x[i]) : __float2bfloat16(-7.0f);
      same += std::memcmp(&copy[i], &expected, sizeof expected) == 0;
    }
    CHECK(same == n);
  }
}

TEST_CASE("transformer kernels (emulated): GELU's backward pass with the column sums: the bits of the two passes") {
  const int rows = 9 * kColumnSumChunkRows + 5, cols = 40;
  const std::size_t n = std::size_t(rows) * cols;
  const auto x = uniform<float>(n, 8, -4, 4), dout = uniform<float>(n, 9);
  const unsigned chunks = blocks(rows, kColumnSumChunkRows);
  const cuda_emu::Index grid{blocks(cols, 32), chunks, 1}, one_row{blocks(cols, 32), 1, 1};
  // Two passes: gelu_backward_kernel, then the column sums with the copy.
  std::vector<float> dx_two(n), partial(std::size_t(chunks) * cols), sums_two(cols);
  std::vector<__nv_bfloat16> copy_two(n);
  cuda_emu::launch({4, 1, 1}, 64, 0, gelu_backward_kernel<float>, n, x.data(), dout.data(), dx_two.data());
  cuda_emu::launch(grid, kSumBlock, 0, column_partials_kernel<false>, rows, cols,
                   static_cast<const float*>(dx_two.data()), static_cast<const float*>(nullptr),
                   static_cast<float*>(nullptr), partial.data(), copy_two.data());
  cuda_emu::launch(one_row, kSumBlock, 0, column_chunk_sums_kernel, static_cast<int>(chunks), cols,
                   static_cast<const float*>(partial.data()), sums_two.data());
  // One, in place (dx is dout), as the GPT step runs it.
  std::vector<float> dx_one = dout, sums_one(cols);
  std::vector<__nv_bfloat16> copy_one(n);
  cuda_emu::launch(grid, kSumBlock, 0, column_partials_kernel<true>, rows, cols,
                   static_cast<const float*>(dx_one.data()), x.data(), dx_one.data(), partial.data(), copy_one.data());
  cuda_emu::launch(one_row, kSumBlock, 0, column_chunk_sums_kernel, static_cast<int>(chunks), cols,
                   static_cast<const float*>(partial.data()), sums_one.data());
  CHECK(std::memcmp(dx_one.data(), dx_two.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(sums_one.data(), sums_two.data(), cols * sizeof(float)) == 0);
  CHECK(std::memcmp(copy_one.data(), copy_two.data(), n * sizeof(__nv_bfloat16)) == 0);
  // Without dx (the bf16 copy all the products read): dout untouched, the same sums and copy.
  std::vector<float> dout_kept = dout, sums_bare(cols);
  std::vector<__nv_bfloat16> copy_bare(n);
  cuda_emu::launch(grid, kSumBlock, 0, column_partials_kernel<true>, rows, cols,
                   static_cast<const float*>(dout_kept.data()), x.data(), static_cast<float*>(nullptr), partial.data(),
                   copy_bare.data());
  cuda_emu::launch(one_row, kSumBlock, 0, column_chunk_sums_kernel, static_cast<int>(chunks), cols,
                   static_cast<const float*>(partial.data()), sums_bare.data());
  CHECK(std::memcmp(dout_kept.data(), dout.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(sums_bare.data(), sums_two.data(), cols * sizeof(float)) == 0);
  CHECK(std::memcmp(copy_bare.data(), copy_two.data(), n * sizeof(__nv_bfloat16)) == 0);
  // And the gradient is GELU's: against the reference's derivative in double, at a few points.
  for (const std::size_t i : {std::size_t{0}, n / 3, n - 1}) {
    const double xi = x[i], cdf = 0.5 * (1 + std::erf(xi / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * xi * xi) / std::sqrt(2 * std::acos(-1.0));
    CHECK(dx_one[i] == doctest::Approx(dout[i] * (cdf + xi * pdf)).epsilon(1e-5));
  }
}

TEST_CASE(
    "transformer kernels (emulated): LayerNorm's weight gradients over more chunks than row groups, added to "
    "what is there") {
  const int chunks = 2 * kSumGroups + 3, C = 40;
  const auto pw = uniform<float>(std::size_t(chunks) * C, 11), pb = uniform<float>(std::size_t(chunks) * C, 12);
  std::vector<float> dw(C, 0.5f), db(C, -0.25f);
  cuda_emu::launch({blocks(C, 32), 1, 1}, kSumBlock, 0, layernorm_param_sums_kernel, chunks, C, pw.data(), pb.data(),
                   dw.data(), db.data());
  std::vector<double> want_w(C, 0.5), want_b(C, -0.25);
  for (int k = 0; k < chunks; ++k)
    for (int c = 0; c < C; ++c) want_w[c] += pw[std::size_t(k) * C + c], want_b[c] += pb[std::size_t(k) * C + c];
  CHECK(scaled_error(dw, want_w) < 1e-6);
  CHECK(scaled_error(db, want_b) < 1e-6);
}

TEST_CASE("transformer kernels (emulated): LayerNorm forward and backward") {
  const int rows = 300, C = 70;  // two chunks of rows for the weight gradients, the last partial
  const auto x = uniform<float>(std::size_t(rows) * C, 5, -3, 3), w = uniform<float>(C, 6, 0.5f, 1.5f),
             b = uniform<float>(C, 7), dout = uniform<float>(std::size_t(rows) * C, 8);
  std::vector<float> out(x.size()), mean(rows), rstd(rows), dx(x.size(), 0.0f), dw(C, 0.0f), db(C, 0.0f);
  std::vector<__nv_bfloat16> copy(x.size());
  cuda_emu::launch({blocks(rows, kWarps), 1, 1}, kThreads, 0, layernorm_forward_kernel, rows, C, x.data(), w.data(),
                   b.data(), out.data(), mean.data(), rstd.data(), copy.data());
  std::size_t copied = 0;  // the bf16 copy: out, rounded to nearest even
  for (std::size_t i = 0; i < out.size(); ++i) {
    const __nv_bfloat16 expected = __float2bfloat16_rn(out[i]);
    copied += std::memcmp(&copy[i], &expected, sizeof expected) == 0;
  }
  CHECK(copied == out.size());
  {  // The copy alone: the same bits, mean and rstd
    std::vector<float> mean_bare(rows), rstd_bare(rows);
    std::vector<__nv_bfloat16> copy_bare(x.size());
    cuda_emu::launch({blocks(rows, kWarps), 1, 1}, kThreads, 0, layernorm_forward_kernel, rows, C, x.data(), w.data(),
                     b.data(), static_cast<float*>(nullptr), mean_bare.data(), rstd_bare.data(), copy_bare.data());
    CHECK(std::memcmp(copy_bare.data(), copy.data(), copy.size() * sizeof(__nv_bfloat16)) == 0);
    CHECK(mean_bare == mean);
    CHECK(rstd_bare == rstd);
  }
  cuda_emu::launch({blocks(rows, kWarps), 1, 1}, kThreads, 0, layernorm_dx_kernel, rows, C, x.data(), w.data(),
                   static_cast<const float*>(mean.data()), static_cast<const float*>(rstd.data()), dout.data(),
                   dx.data());
  const unsigned chunks = blocks(rows, kLayerNormChunkRows);
  std::vector<float> pw(std::size_t(chunks) * C), pb(std::size_t(chunks) * C);
  cuda_emu::launch({blocks(C, 32), chunks, 1}, kSumBlock, 0, layernorm_param_partials_kernel, rows, C, x.data(),
                   static_cast<const float*>(mean.data()), static_cast<const float*>(rstd.data()), dout.data(),
                   pw.data(), pb.data());
  cuda_emu::launch({blocks(C, 32), 1, 1}, kSumBlock, 0, layernorm_param_sums_kernel, static_cast<int>(chunks), C,
                   static_cast<const float*>(pw.data()), static_cast<const float*>(pb.data()), dw.data(), db.data());
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  std::vector<double> o(x.size()), m(rows), s(rows), ddx(x.size(), 0.0), ddw(C, 0.0), ddb(C, 0.0);
  slurm_train::kernels::layernorm_forward(rows, C, xd.data(), wd.data(), bd.data(), o.data(), m.data(), s.data());
  slurm_train::kernels::layernorm_backward(rows, C, xd.data(), wd.data(), m.data(), s.data(), to_double(dout).data(),
                                           ddx.data(), ddw.data(), ddb.data());
  CHECK(scaled_error(out, o) < 1e-5);
  CHECK(scaled_error(dx, ddx) < 1e-5);
  CHECK(scaled_error(dw, ddw) < 1e-5);
  CHECK(scaled_error(db, ddb) < 1e-5);
}

TEST_CASE("transformer kernels (emulated): fused fp32 attention forward and backward, head sizes 16 and 5") {
  struct Shape {
    int B, T, C, H;
  };
  for (const Shape s : {Shape{2, 37, 64, 4}, Shape{1, 45, 40, 8}}) {
    CAPTURE(s.T);
    CAPTURE(s.C);
    const int hs = s.C / s.H, rows = s.B * s.H * s.T;
    const std::size_t n = std::size_t(s.B) * s.T;
    const auto qkv = uniform<float>(n * 3 * s.C, 9, -2, 2), dout = uniform<float>(n * s.C, 10);
    std::vector<float> out(n * s.C), lse(rows), delta(rows), dqkv(qkv.size(), 0.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const cuda_emu::Index grid{static_cast<unsigned>(s.B * s.H), blocks(s.T, kAttentionWarps), 1};
    cuda_emu::launch(grid, kAttentionThreads, 0, attention_forward_kernel, s.T, s.C, s.H, scale, qkv.data(), out.data(),
                     lse.data());
    cuda_emu::launch({blocks(rows, kWarps), 1, 1}, kThreads, 0, attention_dsum_kernel, rows, s.T, s.C, s.H,
                     static_cast<const float*>(out.data()), dout.data(), delta.data());
    cuda_emu::launch(grid, kAttentionThreads, 0, attention_dkv_kernel, s.T, s.C, s.H, scale, qkv.data(), dout.data(),
                     static_cast<const float*>(lse.data()), static_cast<const float*>(delta.data()), dqkv.data());
    cuda_emu::launch(grid, kAttentionThreads, 0, attention_dq_kernel, s.T, s.C, s.H, scale, qkv.data(), dout.data(),
                     static_cast<const float*>(lse.data()), static_cast<const float*>(delta.data()), dqkv.data());
    const auto qd = to_double(qkv);
    std::vector<double> o(n * s.C), probs(std::size_t(rows) * s.T), dq(qkv.size(), 0.0);
    slurm_train::kernels::attention_forward(s.B, s.T, s.C, s.H, qd.data(), o.data(), probs.data());
    slurm_train::kernels::attention_backward(s.B, s.T, s.C, s.H, qd.data(), probs.data(), to_double(dout).data(),
                                             dq.data());
    CHECK(scaled_error(out, o) < 1e-5);
    CHECK(scaled_error(dqkv, dq) < 1e-5);
  }
}
#endif  // SLURM_TRAIN_WITH_CUDA
