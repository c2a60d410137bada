// The tensor-core attention's device code (kernels/cuda/flash_attention_kernels.cuh) run on the
// CPU emulation of CUDA's execution model (cuda_emulation.h), against the plain-loop reference
// in double (kernels/cpu/transformer_ops.h): its tiling, causal masking, online softmax, the
// recomputation of the probabilities in the backward pass and its barriers, on shapes with
// partial tiles. The GPU itself runs the same code in test/cuda/.
//
// Bounds, in the largest error over the largest magnitude of the result: Q, K, V, dO, P and dS
// are rounded to bf16 (2^-9 relative each) as operands of the products, so the outputs carry
// errors of a few 2^-9: at most 4.1e-3 here (the logsumexp 1.1e-3). 1e-2 (5e-3) leaves a margin,
// while a wrong index, mask or rescaling gives errors of order 1e-1 to 1 (checked below: the
// causal mask moved by one key is off by 1.1).
#if defined(SLURM_TRAIN_WITH_CUDA)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// First: the device code below is compiled against the emulation.
#include "test/unit/cuda_emulation.h"

#include "kernels/cpu/transformer_ops.h"
#include "kernels/cuda/flash_attention_kernels.cuh"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train::cuda_test;
using namespace slurm_train::cuda::flash_detail;

struct Shape {
  int B, T, C, H;
};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The logsumexp of each row's scaled causal scores, in double: [B*H*T].
std::vector<double> reference_logsumexp(const Shape& s, const std::vector<double>& qkv) {
  const int hs = s.C / s.H;
  const std::int64_t row = 3 * s.C;
  std::vector<double> out(static_cast<std::size_t>(s.B) * s.H * s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        std::vector<double> scores;
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0;
          for (int i = 0; i < hs; ++i)
            dot += qkv[(b * s.T + t) * row + h * hs + i] * qkv[(b * s.T + t2) * row + s.C + h * hs + i];
          scores.push_back(dot / std::sqrt(static_cast<double>(hs)));
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (const double x : scores) sum += std::exp(x - max);
        out[(static_cast<std::size_t>(b) * s.H + h) * s.T + t] = max + std::log(sum);
      }
  return out;
}

struct Result {
  std::vector<float> out, lse, dqkv;
  std::vector<bf16> out_copy;
};

// The forward pass (with out's bf16 copy), D and the backward pass. dqkv starts as NaNs: the
// backward pass must write every element and read none.
Result run_emulated(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
  const int hs = s.C / s.H, key_tiles = (s.T + kFlashTile - 1) / kFlashTile;
  const int query_tiles = (s.T + kFlashQueryRows - 1) / kFlashQueryRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  Result r;
  r.out.assign(static_cast<std::size_t>(s.B) * s.T * s.C, 0.0f);
  r.lse.assign(static_cast<std::size_t>(s.B) * s.H * s.T, 0.0f);
  r.out_copy.assign(r.out.size(), __float2bfloat16(0.0f));
  r.dqkv.assign(qkv.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> delta(r.lse.size());
  // The dS tiles, 256-byte aligned as in a cudaMalloc'd scratch, NaN at the start: the dQ kernel
  // must read only tiles the dK/dV kernel wrote.
  const std::size_t ds_count = static_cast<std::size_t>(s.B) * s.H * flash_ds_tiles(s.T) * kFlashTileElements;
  std::vector<bf16> ds_storage(ds_count + 128, __float2bfloat16(std::numeric_limits<float>::quiet_NaN()));
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(ds_storage.data());
  bf16* ds_tiles = ds_storage.data() + ((256 - start % 256) % 256) / sizeof(bf16);
  const cuda_emu::Index key_grid{static_cast<unsigned>(s.B * s.H), static_cast<unsigned>(key_tiles), 1};
  const cuda_emu::Index query_grid{static_cast<unsigned>(s.B * s.H), static_cast<unsigned>(query_tiles), 1};
  const unsigned rows = static_cast<unsigned>(s.B * s.H * s.T);
  with_head_size(hs, [&](auto head_size) {
    constexpr int HS = decltype(head_size)::value;
    cuda_emu::launch(query_grid, kFlashQueryThreads, flash_forward_shared_bytes(hs), flash_forward_kernel<HS>, s.T, s.C,
                     s.H, scale, qkv.data(), r.out.data(), r.lse.data(), r.out_copy.data());
    cuda_emu::launch({(rows + kDeltaWarps - 1) / kDeltaWarps, 1, 1}, kDeltaWarps * 32, 0, flash_delta_kernel, s.B, s.T,
                     s.C, s.H, hs, r.out.data(), dout.data(), delta.data());
    cuda_emu::launch(key_grid, kFlashKeyThreads, flash_backward_shared_bytes(hs), flash_dkdv_kernel<HS>, s.T, s.C, s.H,
                     scale, qkv.data(), dout.data(), r.lse.data(), delta.data(), r.dqkv.data(), ds_tiles);
    cuda_emu::launch(query_grid, kFlashQueryThreads, flash_dq_shared_bytes(hs), flash_dq_kernel<HS>, s.T, s.C, s.H,
                     scale, qkv.data(), static_cast<const bf16*>(ds_tiles), r.dqkv.data());
  });
  return r;
}

}  // namespace

TEST_CASE(
    "flash attention (emulated): forward and backward against the reference, partial tiles and head sizes 16 to 128") {
  // T: one partial tile, whole tiles, two and a half, and three 128-query blocks (the last
  // partial) over five key tiles; head sizes 16, 32, 64, 96, 128.
  const Shape shapes[] = {{1, 17, 64, 2},   {2, 64, 64, 4},  {1, 130, 96, 1},
                          {2, 100, 128, 2}, {1, 40, 256, 2}, {1, 300, 64, 1}};
  std::uint64_t seed = 11;
  for (const Shape& s : shapes) {
    CAPTURE(s.B);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.H);
    const std::size_t n = static_cast<std::size_t>(s.B) * s.T;
    const auto qkv = uniform<float>(n * 3 * s.C, ++seed, -1.5f, 1.5f);
    const auto dout = uniform<float>(n * s.C, ++seed, -1.0f, 1.0f);
    const Result got = run_emulated(s, qkv, dout);

    const auto qkv_d = to_double(qkv);
    std::vector<double> out(n * s.C), probs(static_cast<std::size_t>(s.B) * s.H * s.T * s.T);
    slurm_train::kernels::attention_forward(s.B, s.T, s.C, s.H, qkv_d.data(), out.data(), probs.data());
    std::vector<double> dqkv(n * 3 * s.C, 0.0);
    slurm_train::kernels::attention_backward(s.B, s.T, s.C, s.H, qkv_d.data(), probs.data(), to_double(dout).data(),
                                             dqkv.data());
    CHECK(scaled_error(got.out, out) < 1e-2);
    std::size_t copied = 0;  // out's bf16 copy: out rounded to nearest even
    for (std::size_t i = 0; i < got.out.size(); ++i) {
      const bf16 expected = __float2bfloat16_rn(got.out[i]);
      copied += std::memcmp(&got.out_copy[i], &expected, sizeof expected) == 0;
    }
    CHECK(copied == got.out.size());
    // The logsumexp feeds the recomputed probabilities: bf16 scores are within 2^-8 of the exact.
    CHECK(scaled_error(got.lse, reference_logsumexp(s, qkv_d)) < 5e-3);
    // q, k and v parts together.
    CHECK(std::none_of(got.dqkv.begin(), got.dqkv.end(), [](float x) { return std::isnan(x); }));
    CHECK(scaled_error(got.dqkv, dqkv) < 1e-2);
  }
}

TEST_CASE("flash attention (emulated): the bounds catch a wrong kernel") {
  // Against a reference whose causal mask leaves out the query's own key, the kernel must fail
  // the forward bound by far, or the bound is too loose to catch a masking error.
  const Shape s{1, 70, 64, 2};
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T;
  const auto qkv = uniform<float>(n * 3 * s.C, 5, -1.5f, 1.5f);
  const auto dout = uniform<float>(n * s.C, 6, -1.0f, 1.0f);
  const Result got = run_emulated(s, qkv, dout);
  // A reference over keys 0..t-1 only (the query's own key left out) for every query but the first.
  const int hs = s.C / s.H;
  std::vector<double> wrong(n * s.C);
  for (int h = 0; h < s.H; ++h)
    for (int t = 0; t < s.T; ++t) {
      const int last = t == 0 ? 0 : t - 1;
      std::vector<double> w;
      double max = -1e300;
      for (int t2 = 0; t2 <= last; ++t2) {
        double dot = 0;
        for (int i = 0; i < hs; ++i)
          dot += double(qkv[t * 3 * s.C + h * hs + i]) * qkv[t2 * 3 * s.C + s.C + h * hs + i];
        w.push_back(dot / std::sqrt(double(hs)));
        max = std::max(max, w.back());
      }
      double sum = 0;
      for (double& x : w) sum += x = std::exp(x - max);
      for (int i = 0; i < hs; ++i) {
        double o = 0;
        for (int t2 = 0; t2 <= last; ++t2) o += w[t2] / sum * qkv[t2 * 3 * s.C + 2 * s.C + h * hs + i];
        wrong[t * s.C + h * hs + i] = o;
      }
    }
  CHECK(scaled_error(got.out, wrong) > 1e-1);
}

TEST_CASE("flash attention (emulated): the kernels' shared memory fits an H100's for every head size taken") {
  // A block's at most 227 KiB; up to GPT-2's head size, two blocks a multiprocessor (as many as
  // the registers allow, __launch_bounds__), each with the 1 KiB the hardware reserves, in 228.
  for (int hs = 16; hs <= 128; hs += 16) {
    CAPTURE(hs);
    const int blocks = hs <= 64 ? 2 : 1;
    CHECK(blocks * (flash_forward_shared_bytes(hs) + 1024) <= 228 * 1024);
    CHECK(blocks * (flash_backward_shared_bytes(hs) + 1024) <= 228 * 1024);
    CHECK(blocks * (flash_dq_shared_bytes(hs) + 1024) <= 228 * 1024);
  }
}

TEST_CASE("flash attention (emulated): the dS tiles: n(n+1)/2 a head, in row order, and the scratch that holds them") {
  CHECK(flash_ds_tiles(1) == 1);
  CHECK(flash_ds_tiles(64) == 1);
  CHECK(flash_ds_tiles(65) == 3);
  CHECK(flash_ds_tiles(1024) == 136);
  // (i, j <= i) in the order (0,0), (1,0), (1,1), (2,0): every tile of a head once, heads one after another.
  const int T = 200, tiles = 4;
  std::vector<int> seen(static_cast<std::size_t>(2 * flash_ds_tiles(T)), 0);
  for (int bh = 0; bh < 2; ++bh)
    for (int i = 0; i < tiles; ++i)
      for (int j = 0; j <= i; ++j) ++seen.at(static_cast<std::size_t>(flash_ds_tile_index(T, bh, i, j)));
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
  CHECK(flash_ds_tile_index(T, 1, 0, 0) == flash_ds_tiles(T));
  CHECK(flash_ds_tile_index(T, 0, 2, 1) == 4);
}

TEST_CASE("flash attention (emulated): the kernels' head sizes are the multiples of 16 up to 128") {
  for (int hs = 16; hs <= 128; hs += 16) {
    int got = 0;
    with_head_size(hs, [&](auto head_size) { got = decltype(head_size)::value; });
    CHECK(got == hs);
  }
  for (const int hs : {0, 8, 40, 144}) {
    CAPTURE(hs);
    CHECK_THROWS_WITH_AS(
        with_head_size(hs, [](auto) {}),
        ("flash attention: head size " + std::to_string(hs) + ": expected a multiple of 16 up to 128").c_str(),
        std::invalid_argument);
  }
}
#endif  // SLURM_TRAIN_WITH_CUDA
