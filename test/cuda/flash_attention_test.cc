// The tensor-core attention (kernels/cuda/flash_attention.h) on the GPU against the plain-loop
// reference in double, and against the fp32 fused kernels it stands in for in bf16 training.
// Bounds as test/unit/flash_attention_emulated_test.cc, which runs the same device code on a CPU
// emulation (1e-2 of the result's scale for out and the gradients, 5e-3 for the logsumexp: bf16
// operands); here the GPU's own tensor cores, expf and scheduling, and twice for the same bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/transformer_ops.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/flash_attention.h"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;
using cuda::DeviceBuffer;

struct Shape {
  int B, T, C, H;
};
// Head sizes 16 to 128; T below a tile, whole tiles, and GPT-2's 1024 (at one sequence).
constexpr Shape kShapes[] = {{2, 37, 64, 4}, {1, 128, 128, 2}, {1, 130, 96, 1}, {2, 100, 256, 2}, {1, 1024, 128, 2}};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> reference_logsumexp(const Shape& s, const std::vector<double>& qkv) {
  const int hs = s.C / s.H;
  std::vector<double> lse(std::size_t(s.B) * s.H * s.T), scores(s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        double max = -std::numeric_limits<double>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0;
          for (int i = 0; i < hs; ++i)
            dot += qkv[(std::size_t(b) * s.T + t) * 3 * s.C + h * hs + i] *
                   qkv[(std::size_t(b) * s.T + t2) * 3 * s.C + s.C + h * hs + i];
          scores[t2] = dot / std::sqrt(static_cast<double>(hs));
          max = std::max(max, scores[t2]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += std::exp(scores[t2] - max);
        lse[(std::size_t(b) * s.H + h) * s.T + t] = max + std::log(sum);
      }
  return lse;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda flash attention: forward and backward match the reference, write all of dqkv, and repeat bit for bit" *
          doctest::skip(no_gpu())) {
  for (const Shape s : kShapes) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.H);
    REQUIRE(cuda::flash_attention_supported(s.C, s.H));
    const std::size_t rows = std::size_t(s.B) * s.T, heads_rows = std::size_t(s.B) * s.H * s.T;
    const auto qkv = uniform<float>(rows * 3 * s.C, seed, -1.5, 1.5);
    const auto dout = uniform<float>(rows * s.C, seed + 1);
    // dqkv starts as NaNs: the backward pass must write every element and read none.
    const std::vector<float> start(qkv.size(), std::numeric_limits<float>::quiet_NaN());
    const auto qkv_d = to_double(qkv);
    std::vector<double> out(rows * s.C), probs(heads_rows * s.T), dqkv(qkv.size());
    kernels::attention_forward(s.B, s.T, s.C, s.H, qkv_d.data(), out.data(), probs.data());
    kernels::attention_backward(s.B, s.T, s.C, s.H, qkv_d.data(), probs.data(), to_double(dout).data(), dqkv.data());

    auto d_qkv = to_device(qkv), d_dout = to_device(dout);
    DeviceBuffer<float> d_out(out.size()), d_lse(heads_rows);
    DeviceBuffer<float> scratch(cuda::flash_attention_backward_scratch_floats(s.B, s.T, s.H));
    DeviceBuffer<__nv_bfloat16> out_copy(out.size());
    cuda::flash_attention_forward(s.B, s.T, s.C, s.H, d_qkv.data(), d_out.data(), d_lse.data(), nullptr,
                                  out_copy.data());
    const auto got_out = to_host(d_out.data(), out.size());
    CHECK(scaled_error(got_out, out) < 1e-2);
    {  // the bf16 copy: out, rounded as cast rounds it
      DeviceBuffer<__nv_bfloat16> cast(out.size());
      cuda::cast(out.size(), d_out.data(), cast.data(), nullptr);
      const auto a = to_host(out_copy.data(), out.size()), c = to_host(cast.data(), out.size());
      CHECK(std::memcmp(a.data(), c.data(), a.size() * sizeof(__nv_bfloat16)) == 0);
    }
    CHECK(scaled_error(to_host(d_lse.data(), heads_rows), reference_logsumexp(s, qkv_d)) < 5e-3);
    const auto backward = [&] {
      auto d_dqkv = to_device(start);
      cuda::flash_attention_backward(s.B, s.T, s.C, s.H, d_qkv.data(), d_out.data(), d_dout.data(), d_lse.data(),
                                     d_dqkv.data(), scratch.data(), nullptr);
      return to_host(d_dqkv.data(), qkv.size());
    };
    const auto got = backward();
    CHECK(std::none_of(got.begin(), got.end(), [](float x) { return std::isnan(x); }));
    CHECK(scaled_error(got, dqkv) < 1e-2);
    CHECK(same_bits(backward(), got));
  }
}

TEST_CASE("cuda flash attention: head sizes it does not take are refused, and said so" * doctest::skip(no_gpu())) {
  CHECK_FALSE(cuda::flash_attention_supported(40, 8));   // 5
  CHECK_FALSE(cuda::flash_attention_supported(288, 2));  // 144 > 128
  CHECK(cuda::flash_attention_supported(768, 12));       // GPT-2's 64
  DeviceBuffer<float> buffer(1);
  CHECK_THROWS_AS(cuda::flash_attention_forward(1, 4, 40, 8, buffer.data(), buffer.data(), buffer.data(), nullptr),
                  std::invalid_argument);
}

TEST_CASE("cuda flash attention: misaligned tensors are refused, and named" * doctest::skip(no_gpu())) {
  const int B = 1, T = 8, C = 64, H = 4;
  DeviceBuffer<float> qkv(B * T * 3 * C + 4), out(B * T * C + 4), lse(B * H * T);
  DeviceBuffer<float> scratch(cuda::flash_attention_backward_scratch_floats(B, T, H));
  // One float on: 4-byte aligned, neither 8 nor 16.
  CHECK_THROWS_WITH_AS(cuda::flash_attention_forward(B, T, C, H, qkv.data() + 1, out.data(), lse.data(), nullptr),
                       "flash_attention_forward: qkv is not 16-byte aligned", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cuda::flash_attention_forward(B, T, C, H, qkv.data(), out.data() + 1, lse.data(), nullptr),
                       "flash_attention_forward: out is not 8-byte aligned", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cuda::flash_attention_backward(B, T, C, H, qkv.data(), out.data(), out.data() + 1, lse.data(),
                                                      qkv.data(), scratch.data(), nullptr),
                       "flash_attention_backward: dout is not 16-byte aligned", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cuda::flash_attention_backward(B, T, C, H, qkv.data(), out.data(), out.data(), lse.data(),
                                                      qkv.data() + 1, scratch.data(), nullptr),
                       "flash_attention_backward: dqkv is not 8-byte aligned", std::invalid_argument);
}
