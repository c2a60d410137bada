// The element-wise, loss and optimizer kernels' device code (kernels/cuda/elementwise_kernels_
// device.cuh) on the CPU emulation of CUDA's execution model (cuda_emulation.h), with their host
// launchers' grids and blocks, against the CPU reference kernels (kernels/cpu/reference_kernels.h)
// that share their per-element formulas (kernels/elementwise.h): bias, activation and dropout
// forward and backward (the same masks), the softmax cross-entropy with label smoothing, AdamW
// with decay-free ranges, clipping factor and bf16 working copy, and the global norm. Element-wise
// results equal the reference's bit for bit; sums within fp32 (or double) rounding of a
// different order.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

// First: the device code below is compiled against the emulation.
#include "test/unit/cuda_emulation.h"

#include "kernels/cuda/elementwise_kernels_device.cuh"
#include "kernels/kernels.h"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train::cuda_test;
using namespace slurm_train::cuda;
using namespace slurm_train::cuda::elementwise_detail;
using slurm_train::kernels::Activation;

}  // namespace

TEST_CASE("elementwise kernels (emulated): bias, activation and dropout, forward and backward, as the reference") {
  auto reference = slurm_train::kernels::make_reference_kernels<float>();
  const int rows = 40, cols = 45;
  for (const Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGelu}) {
    for (const float p : {0.0f, 0.3f}) {
      CAPTURE(static_cast<int>(act));
      CAPTURE(p);
      const DropoutParams dropout{p, 0x5eed, 77};
      const auto z0 = uniform<float>(std::size_t(rows) * cols, 1, -3, 3), bias = uniform<float>(cols, 2),
                 dout = uniform<float>(z0.size(), 3);
      std::vector<float> z = z0, out(z0.size()), dz(z0.size()), dbias(cols);
      const std::size_t total = z.size();
      cuda_emu::launch({3, 1, 1}, kThreads, 0, bias_activation_kernel<float>, act, rows, cols,
                       static_cast<const float*>(bias.data()), z.data(), out.data(), dropout);
      cuda_emu::launch({static_cast<unsigned>((cols + 31) / 32), 1, 1}, cuda_emu::Index{32, 8, 1}, 0,
                       activation_backward_kernel<float>, act, rows, cols, static_cast<const float*>(z.data()),
                       dout.data(), dz.data(), dbias.data(), dropout);
      std::vector<float> rz = z0, rout(total), rdz(total), rdbias(cols);
      reference->bias_activation_forward(act, rows, cols, bias.data(), rz.data(), rout.data(), dropout);
      reference->activation_backward(act, rows, cols, rz.data(), dout.data(), rdz.data(), rdbias.data(), dropout);
      CHECK(z == rz);
      CHECK(out == rout);
      CHECK(dz == rdz);
      CHECK(scaled_error(dbias, rdbias) < 1e-6);
    }
  }
}

TEST_CASE("elementwise kernels (emulated): GELU keeping its derivative, forward and backward, as the reference") {
  auto reference = slurm_train::kernels::make_reference_kernels<float>();
  const int rows = 40, cols = 45;
  const auto z0 = uniform<float>(std::size_t(rows) * cols, 5, -6, 6), bias = uniform<float>(cols, 6),
             dout = uniform<float>(z0.size(), 7);
  std::vector<float> z = z0, out(z0.size()), dz(z0.size()), dbias(cols);
  cuda_emu::launch({3, 1, 1}, kThreads, 0, bias_gelu_kernel<float>, rows, cols, static_cast<const float*>(bias.data()),
                   z.data(), out.data());
  cuda_emu::launch({static_cast<unsigned>((cols + 31) / 32), 1, 1}, cuda_emu::Index{32, 8, 1}, 0,
                   gelu_backward_kernel<float>, rows, cols, static_cast<const float*>(z.data()), dout.data(), dz.data(),
                   dbias.data());
  std::vector<float> rz = z0, rout(z0.size()), rdz(z0.size()), rdbias(cols);
  reference->bias_gelu_forward(rows, cols, bias.data(), rz.data(), rout.data());
  reference->gelu_backward(rows, cols, rz.data(), dout.data(), rdz.data(), rdbias.data());
  CHECK(z == rz);
  CHECK(out == rout);
  CHECK(dz == rdz);
  CHECK(scaled_error(dbias, rdbias) < 1e-6);
}

TEST_CASE("elementwise kernels (emulated): softmax cross-entropy with label smoothing, its sums and a bad label") {
  auto reference = slurm_train::kernels::make_reference_kernels<float>();
  const int rows = 21, classes = 10;
  const auto logits = uniform<float>(std::size_t(rows) * classes, 4, -4, 4);
  std::vector<std::int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % classes;
  std::vector<float> dlogits(logits.size()), row_loss(rows);
  std::vector<int> row_flag(rows);
  LossSums sums{};
  const LossScratch scratch{row_loss.data(), row_flag.data()};
  constexpr int kRowsPerBlock = kThreads / 32;
  cuda_emu::launch({(rows + kRowsPerBlock - 1) / kRowsPerBlock, 1, 1}, kThreads, 0, softmax_cross_entropy_kernel<float>,
                   rows, classes, logits.data(), static_cast<const std::int32_t*>(labels.data()), 0.1f, 0.5f,
                   dlogits.data(), scratch);
  cuda_emu::launch({1, 1, 1}, kThreads, 0, loss_sums_kernel, rows, scratch, &sums);
  std::vector<float> want_d(logits.size());
  const auto want =
      reference->softmax_cross_entropy(rows, classes, logits.data(), labels.data(), 0.1f, 0.5f, want_d.data());
  CHECK(scaled_error(dlogits, want_d) < 1e-6);
  CHECK(std::abs(sums.loss_sum - want.loss_sum) < 1e-5 * std::abs(want.loss_sum));
  CHECK(sums.correct == want.correct);
  CHECK(sums.first_bad_row == -1);
  labels[13] = classes, labels[17] = -1;  // the first bad row is named
  cuda_emu::launch({(rows + kRowsPerBlock - 1) / kRowsPerBlock, 1, 1}, kThreads, 0, softmax_cross_entropy_kernel<float>,
                   rows, classes, logits.data(), static_cast<const std::int32_t*>(labels.data()), 0.1f, 0.5f,
                   dlogits.data(), scratch);
  cuda_emu::launch({1, 1, 1}, kThreads, 0, loss_sums_kernel, rows, scratch, &sums);
  CHECK(sums.first_bad_row == 13);
}

TEST_CASE(
    "elementwise kernels (emulated): AdamW with decay-free ranges, a clipping factor and the bf16 copy; the norm") {
  auto reference = slurm_train::kernels::make_reference_kernels<float>();
  const std::size_t n = 1000;
  const auto p0 = uniform<float>(n, 5), g = uniform<float>(n, 6), m0 = uniform<float>(n, 7, -0.1f, 0.1f),
             v0 = uniform<float>(n, 8, 0.0f, 0.01f);
  AdamWParams h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3};
  DecayFreeRanges no_decay;
  no_decay.count = 2, no_decay.begin[0] = 100, no_decay.end[0] = 150, no_decay.begin[1] = 990, no_decay.end[1] = 1000;
  const float factor = 0.5f;
  std::vector<float> p = p0, m = m0, v = v0;
  std::vector<bf16> copy(n);
  const auto bias = slurm_train::kernels::adamw_bias_correction(h);
  cuda_emu::launch({2, 1, 1}, kThreads, 0, adamw_kernel, n, p.data(), g.data(), m.data(), v.data(), h, no_decay,
                   &factor, copy.data(), bias.bias1, bias.bias2_sqrt);
  // The reference on the same scaled gradients, decaying the ranges outside no_decay only.
  std::vector<float> rp = p0, rm = m0, rv = v0, scaled(n);
  for (std::size_t i = 0; i < n; ++i) scaled[i] = g[i] * factor;
  const auto run = [&](std::size_t begin, std::size_t end, float decay) {
    AdamWParams hh = h;
    hh.weight_decay = decay;
    reference->adamw_update(end - begin, rp.data() + begin, scaled.data() + begin, rm.data() + begin, rv.data() + begin,
                            hh);
  };
  run(0, 100, 0.1f), run(100, 150, 0.0f), run(150, 990, 0.1f), run(990, 1000, 0.0f);
  CHECK(p == rp);
  CHECK(m == rm);
  CHECK(v == rv);
  bool copy_ok = true;
  for (std::size_t i = 0; i < n; ++i)
    copy_ok = copy_ok && __bfloat162float(copy[i]) == __bfloat162float(__float2bfloat16_rn(p[i]));
  CHECK(copy_ok);

  // The global norm: one sum per block of kNormBlock, then the blocks' sums in order.
  std::vector<double> partials(1);
  double norm_sq = 0;
  cuda_emu::launch({1, 1, 1}, kThreads, 0, block_sums_of_squares_kernel, n, g.data(), partials.data());
  cuda_emu::launch({1, 1, 1}, kThreads, 0, sum_in_order_kernel, std::size_t{1},
                   static_cast<const double*>(partials.data()), &norm_sq);
  const double want = reference->sum_of_squares(n, g.data());
  CHECK(std::abs(norm_sq - want) < 1e-12 * want);
  float clip = 0;
  cuda_emu::launch({1, 1, 1}, 32, 0, clip_factor_kernel, static_cast<const double*>(&norm_sq), 1.0f, &clip);
  CHECK(clip == doctest::Approx(1.0 / (std::sqrt(want) + 1e-6)).epsilon(1e-6));
}

TEST_CASE("elementwise kernels (emulated): the four-at-a-time bf16 cast rounds each value as the one-at-a-time cast") {
  // Whole quads over a grid that strides, and a tail of 3; values across bf16's rounding ties.
  const std::size_t n = 4 * 300 + 3;
  auto in = uniform<float>(n, 5);
  in[7] = std::bit_cast<float>(0x3f808000u);  // a tie: rounds to even
  in[n - 1] = -0.0f;
  std::vector<bf16> one(n), four(n);
  cuda_emu::launch({2, 1, 1}, 64, 0, cast_kernel<float, bf16>, n, static_cast<const float*>(in.data()), one.data());
  cuda_emu::launch({2, 1, 1}, 64, 0, cast_to_bf16_x4_kernel, n, static_cast<const float*>(in.data()), four.data());
  std::size_t differ = 0, unrounded = 0;
  for (std::size_t i = 0; i < n; ++i) {
    differ += std::bit_cast<std::uint16_t>(one[i]) != std::bit_cast<std::uint16_t>(four[i]);
    unrounded += std::bit_cast<std::uint16_t>(four[i]) != std::bit_cast<std::uint16_t>(__float2bfloat16_rn(in[i]));
  }
  CHECK(differ == 0);
  CHECK(unrounded == 0);
  CHECK(std::bit_cast<std::uint16_t>(four[7]) == 0x3f80);
}

TEST_CASE("elementwise kernels (emulated): two ranks' shards of the norm give the whole gradient's norm, bit for bit") {
  // Three blocks and a short one, cut at a block boundary as two ranks' shards are.
  const std::size_t block = slurm_train::cuda::kNormBlock, n = 3 * block + 1000;
  const auto g = uniform<float>(n, 9);
  std::vector<double> whole(4);
  cuda_emu::launch({4, 1, 1}, kThreads, 0, block_sums_of_squares_kernel, n, g.data(), whole.data());
  // Each rank's block sums in its own place, zeros elsewhere; the all-reduce adds the zeros.
  std::vector<double> rank0(4, 0.0), rank1(4, 0.0), reduced(4);
  cuda_emu::launch({2, 1, 1}, kThreads, 0, block_sums_of_squares_kernel, 2 * block, g.data(), rank0.data());
  cuda_emu::launch({2, 1, 1}, kThreads, 0, block_sums_of_squares_kernel, n - 2 * block, g.data() + 2 * block,
                   rank1.data() + 2);
  for (std::size_t b = 0; b < 4; ++b) reduced[b] = rank0[b] + rank1[b];
  CHECK(reduced == whole);
  double from_whole = 0, from_shards = 0;
  cuda_emu::launch({1, 1, 1}, kThreads, 0, sum_in_order_kernel, std::size_t{4},
                   static_cast<const double*>(whole.data()), &from_whole);
  cuda_emu::launch({1, 1, 1}, kThreads, 0, sum_in_order_kernel, std::size_t{4},
                   static_cast<const double*>(reduced.data()), &from_shards);
  CHECK(from_shards == from_whole);
  // Each block's sum is within double rounding of the exact one.
  long double exact_total = 0;
  for (std::size_t b = 0; b < 4; ++b) {
    long double exact = 0;
    for (std::size_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
      exact += static_cast<long double>(g[i]) * g[i];
    CHECK(std::abs(static_cast<long double>(whole[b]) - exact) < 1e-12L * exact);
    exact_total += exact;
  }
  CHECK(std::abs(static_cast<long double>(from_whole) - exact_total) < 1e-12L * exact_total);
}
#endif  // SLURM_TRAIN_WITH_CUDA
