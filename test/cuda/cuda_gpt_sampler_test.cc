// The GPU's KV-cache decoder against the CPU's (GptSampler), position by position through a
// context that fills the cache and is re-primed, and sample_text driven by either.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "test/cuda/cuda_test_support.h"
#include "test/unit/gpt_test_params.h"
#include "train/models/cuda_gpt_sampler.h"
#include "train/models/gpt.h"
#include "train/models/gpt_sampler.h"

using namespace slurm_train;
using namespace slurm_train::cuda_test;
using slurm_train::testing::trained_looking_params;

TEST_CASE("CUDA gpt decoder: every position's logits as the CPU decoder's, within fp32 rounding" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  // Head size 24 (not a multiple of 32) and a block of 20: the cache fills and is re-primed.
  const GptConfig g{256, 20, 2, 3, 72};
  const HostVector<float> params = trained_looking_params(g, seed);
  GptSampler cpu(g, params);
  const auto gpu = make_cuda_gpt_decoder(g, params, 0);
  const std::vector<std::int32_t> tokens = [&] {
    std::vector<std::int32_t> t(g.block);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(kernels::mix64(seed + i) % 256);
    return t;
  }();
  for (int round = 0; round < 2; ++round) {
    for (const std::int32_t token : tokens) {
      const std::vector<float> want = cpu.feed(token);
      const std::vector<float>& got = gpu->feed(token);
      CAPTURE(round);
      CAPTURE(gpu->position());
      // Sums of at most 4C = 288 products in another order, through two blocks: 1e-5 of the
      // logits' scale leaves a margin over fp32 rounding and still catches a wrong term.
      CHECK(scaled_error(got, want) < 1e-5);
    }
    CHECK(gpu->position() == g.block);
    CHECK_THROWS_AS(gpu->feed(1), std::logic_error);
    cpu.reset();
    gpu->reset();
  }
  CHECK_THROWS_AS(gpu->feed(256), std::invalid_argument);
  CHECK_THROWS_AS(gpu->feed(-1), std::invalid_argument);
}

TEST_CASE("CUDA gpt decoder: sample_text greedy on the GPU takes the CPU's most likely byte each time" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const GptConfig g{256, 16, 2, 2, 32};
  const HostVector<float> params = trained_looking_params(g, seed);
  const auto gpu = make_cuda_gpt_decoder(g, params, 0);
  const SampleOptions greedy{12, 0.0, 0, 0};  // prompt + text stay within the block: no re-priming
  const std::string text = sample_text(*gpu, "hello", greedy);
  REQUIRE(text.size() == 12);
  CHECK(sample_text(*gpu, "hello", greedy) == text);  // reset for each text, and deterministic
  // Each byte is the CPU's arg-max at that position, or within rounding of it (a near tie may
  // fall either way in two summation orders).
  GptSampler cpu(g, params);
  const std::string context = "hello" + text;
  for (std::size_t i = 0; i + 1 < context.size(); ++i) {
    const std::vector<float>& logits = cpu.feed(static_cast<unsigned char>(context[i]));
    if (i + 1 < 5) continue;  // still the prompt
    const float best = *std::max_element(logits.begin(), logits.end());
    CAPTURE(i);
    CHECK(logits[static_cast<unsigned char>(context[i + 1])] >= best - 1e-4f * std::max(1.0f, std::abs(best)));
  }
}

TEST_CASE("CUDA gpt decoder: parameters that do not match the layout are refused" * doctest::skip(no_gpu())) {
  const GptConfig g{256, 16, 2, 2, 32};
  HostVector<float> params;
  gpt_initialize(g, 1, params);
  params.pop_back();
  CHECK_THROWS_AS(make_cuda_gpt_decoder(g, params, 0), std::invalid_argument);
}
