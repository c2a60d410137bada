// Text generation with the GPT model: the KV cache against Gpt::forward over the whole sequence,
// the draws, the context window and the refused inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "test/unit/gpt_test_params.h"
#include "test/unit/test_support.h"
#include "train/models/gpt.h"
#include "train/models/gpt_sampler.h"

using namespace slurm_train;
using slurm_train::testing::trained_looking_params;

namespace {

const GptConfig kConfig{256, 16, 2, 2, 32};

// The KV cache's logits and Gpt::forward's differ by rounding alone: float32 sums of at most
// 4C = 128 terms in another order (OpenBLAS's sgemm against the sampler's loops) through two
// blocks and three LayerNorms: 2.3e-6 at most here, at logits of order 1. 1e-4, relative above
// 1 and absolute below, leaves a wide margin and still catches any wrong term.
constexpr float kTolerance = 1e-4f;

bool close(float a, float b) { return std::abs(a - b) <= kTolerance * std::max(1.0f, std::abs(b)); }

// Gpt::forward's logits [T, V] of one sequence.
std::vector<float> forward_logits(const GptConfig& g, const HostVector<float>& params,
                                  const std::vector<std::int32_t>& tokens) {
  auto k = kernels::make_cpu_kernels(1);
  Gpt gpt(g, *k);
  gpt.params() = params;
  gpt.forward(tokens.data(), tokens.data(), 1, static_cast<int>(tokens.size()));
  return {gpt.logits().begin(), gpt.logits().end()};
}

// Greedy sampling took `chosen`: it must be the arg-max of the full forward pass's last row, up
// to the tolerance above (a near tie may fall either way in two summation orders).
void check_greedy_step(const std::vector<float>& logits, int V, std::size_t row, int chosen) {
  const float* r = logits.data() + row * static_cast<std::size_t>(V);
  const float max = *std::max_element(r, r + V);
  CAPTURE(row);
  CAPTURE(chosen);
  CHECK(close(r[chosen], max));
}

std::vector<std::int32_t> bytes_of(std::string_view s) {
  std::vector<std::int32_t> out;
  for (const char c : s) out.push_back(static_cast<unsigned char>(c));
  return out;
}

}  // namespace

TEST_CASE("gpt sampler: the KV cache gives Gpt::forward's logits at every position") {
  const auto params = trained_looking_params(kConfig, 5);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(kConfig.block));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(kernels::mix64(100 + i) % 256);
  const auto full = forward_logits(kConfig, params, tokens);

  GptSampler sampler(kConfig, params);
  float spread = 0, worst = 0;
  std::vector<float> first;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    CHECK(sampler.position() == static_cast<int>(t));
    const auto& logits = sampler.feed(tokens[t]);
    if (t == 0) first = logits;
    REQUIRE(logits.size() == 256u);
    for (std::size_t v = 0; v < 256; ++v) {
      const float expected = full[t * 256 + v];
      if (!close(logits[v], expected))
        FAIL_CHECK("position " << t << " token " << v << ": " << logits[v] << " vs " << expected);
      worst = std::max(worst, std::abs(logits[v] - expected));
      spread = std::max(spread, std::abs(expected));
    }
  }
  CAPTURE(worst);
  CHECK(spread > 1.0f);  // the weights are not trivial
  CHECK(sampler.position() == kConfig.block);
  CHECK_THROWS_AS(sampler.feed(1), std::logic_error);
  sampler.reset();
  CHECK(sampler.position() == 0);
  CHECK(sampler.feed(tokens[0]) == first);
}

TEST_CASE("gpt sampler: greedy sampling is deterministic and takes the full forward pass's arg-max") {
  const auto params = trained_looking_params(kConfig, 6);
  const SampleOptions greedy{8, 0.0, 0, 0};
  const std::string text = sample_text(kConfig, params, "hello", greedy);
  REQUIRE(text.size() == 8u);
  CHECK(sample_text(kConfig, params, "hello", greedy) == text);
  CHECK(sample_text(kConfig, params, "hello", {8, 0.0, 99, 0}) == text);  // the seed plays no part

  auto context = bytes_of("hello");
  for (const char c : text) {
    check_greedy_step(forward_logits(kConfig, params, context), 256, context.size() - 1, static_cast<unsigned char>(c));
    context.push_back(static_cast<unsigned char>(c));
  }
  // top_k 1 leaves only the arg-max, whatever the temperature.
  CHECK(sample_text(kConfig, params, "hello", {8, 1.5, 3, 1}) == text);

  // An empty prompt starts from '\n'.
  const std::string from_empty = sample_text(kConfig, params, "", {4, 0.0, 0, 0});
  CHECK(from_empty == sample_text(kConfig, params, "\n", {4, 0.0, 0, 0}));
  CHECK(sample_text(kConfig, params, "hello", {0, 0.0, 0, 0}).empty());
}

TEST_CASE("gpt sampler: the same seed draws the same text, another seed another") {
  const auto params = trained_looking_params(kConfig, 7);
  const std::string a = sample_text(kConfig, params, "ab", {12, 1.0, 1, 0});
  CHECK(a.size() == 12u);
  CHECK(sample_text(kConfig, params, "ab", {12, 1.0, 1, 0}) == a);
  CHECK(sample_text(kConfig, params, "ab", {12, 1.0, 2, 0}) != a);

  // top_k 3: every drawn token is among the three largest logits of its context.
  const std::string top3 = sample_text(kConfig, params, "ab", {12, 1.0, 4, 3});
  GptSampler sampler(kConfig, params);
  sampler.feed('a');
  const std::vector<float>* logits = &sampler.feed('b');
  for (const char c : top3) {
    const int token = static_cast<unsigned char>(c);
    const auto larger = std::count_if(logits->begin(), logits->end(), [&](float l) { return l > (*logits)[token]; });
    CHECK(larger < 3);
    logits = &sampler.feed(token);
  }
}

TEST_CASE("gpt sampler: past the block size the context is the last block / 2 tokens") {
  const auto params = trained_looking_params(kConfig, 8);
  const int n = 3 * kConfig.block;
  std::string streamed;
  const std::string text =
      sample_text(kConfig, params, "ab", {n, 0.0, 0, 0}, [&](std::string_view piece) { streamed += piece; });
  REQUIRE(text.size() == static_cast<std::size_t>(n));
  CHECK(streamed == text);

  // The rule, replayed with full forward passes: the context grows by each generated token until
  // it would exceed the block, and then keeps its last block / 2 tokens.
  auto context = bytes_of("ab");
  int reprimes = 0;
  for (const char c : text) {
    check_greedy_step(forward_logits(kConfig, params, context), 256, context.size() - 1, static_cast<unsigned char>(c));
    context.push_back(static_cast<unsigned char>(c));
    if (context.size() > static_cast<std::size_t>(kConfig.block)) {
      context.erase(context.begin(), context.end() - kConfig.block / 2);
      ++reprimes;
    }
  }
  CHECK(reprimes >= 4);

  // A prompt longer than the block: its last block - 1 bytes are the context.
  const std::string long_prompt = "the quick brown fox jumps over the lazy dog";
  const std::string tail = long_prompt.substr(long_prompt.size() - (kConfig.block - 1));
  CHECK(sample_text(kConfig, params, long_prompt, {5, 0.0, 0, 0}) ==
        sample_text(kConfig, params, tail, {5, 0.0, 0, 0}));
}

TEST_CASE("gpt sampler: bad inputs are refused, naming the value") {
  using testing::check_refused;
  const auto params = trained_looking_params(kConfig, 9);
  const auto sample = [&](SampleOptions o) { return [&params, o] { sample_text(kConfig, params, "a", o); }; };
  check_refused<std::invalid_argument>(sample({4, -0.5, 0, 0}), "temperature -0.5: expected a finite number");
  check_refused<std::invalid_argument>(sample({4, std::numeric_limits<double>::quiet_NaN(), 0, 0}), "temperature nan");
  check_refused<std::invalid_argument>(sample({4, std::numeric_limits<double>::infinity(), 0, 0}), "temperature inf");
  check_refused<std::invalid_argument>(sample({-1, 1.0, 0, 0}), "-1 tokens: expected a count of at least 0");
  check_refused<std::invalid_argument>(sample({4, 1.0, 0, -1}),
                                       "top_k -1: expected 0 (every token) up to the vocabulary size 256");
  check_refused<std::invalid_argument>(sample({4, 1.0, 0, 257}), "top_k 257");

  std::vector<float> short_params(params.begin(), params.end() - 1);
  const std::string expected =
      std::to_string(params.size() - 1) + " parameters: expected " + std::to_string(params.size());
  check_refused<std::invalid_argument>([&] { sample_text(kConfig, short_params, "a", {}); }, expected);
  check_refused<std::invalid_argument>([&] { static_cast<void>(GptSampler(kConfig, short_params)); }, expected);

  GptConfig words = kConfig;
  words.vocab = 100;
  HostVector<float> word_params;
  gpt_initialize(words, 1, word_params);
  check_refused<std::invalid_argument>([&] { sample_text(words, word_params, "a", {}); },
                                       "vocab 100: expected 256, one token per byte");

  GptSampler sampler(kConfig, params);
  check_refused<std::invalid_argument>([&] { sampler.feed(256); }, "token 256 is outside the vocabulary [0, 256)");
  check_refused<std::invalid_argument>([&] { sampler.feed(-1); }, "token -1 is outside");
  CHECK(sampler.position() == 0);
  for (int t = 0; t < kConfig.block; ++t) sampler.feed(t);
  check_refused<std::logic_error>([&] { sampler.feed(0); }, "already holds the block size of 16 tokens");
}
