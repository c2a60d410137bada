// The GPT model's layout and initialisation; its numerics are checked against PyTorch
// (test/integration/gpt.bats).
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/kernels.h"
#include "train/models/gpt.h"

using namespace slurm_train;

TEST_CASE("gpt: parameters named and shaped as GPT-2's, packed in order") {
  const GptConfig g{256, 64, 2, 4, 32};
  const auto layout = gpt_layout(g);
  REQUIRE(layout.size() == 2 + 12 * 2 + 2);
  CHECK(layout[0].name == "wte");
  CHECK(layout[0].shape == std::vector<std::int64_t>{256, 32});
  CHECK(layout[1].name == "wpe");
  CHECK(layout[4].name == "h.0.attn.c_attn.weight");
  CHECK(layout[4].shape == std::vector<std::int64_t>{32, 96});
  CHECK(layout[12].name == "h.0.mlp.c_proj.weight");
  CHECK(layout[12].shape == std::vector<std::int64_t>{128, 32});
  CHECK(layout.back().name == "ln_f.bias");
  std::size_t offset = 0;
  for (const auto& t : layout) {
    CHECK(t.offset == offset);
    offset += t.size;
  }
  // 12 C^2 + 13 C per block, embeddings, final LayerNorm.
  CHECK(offset == 256u * 32 + 64 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32);
  CHECK_THROWS_WITH_AS(gpt_layout({256, 64, 2, 3, 32}), doctest::Contains("embd a multiple of heads"),
                       std::invalid_argument);
}

TEST_CASE("gpt: GPT-2's initialisation depends on the seed alone") {
  const GptConfig g{256, 64, 2, 4, 32};
  HostVector<float> a, b, c;
  gpt_initialize(g, 1, a);
  gpt_initialize(g, 1, b);
  gpt_initialize(g, 2, c);
  CHECK(a == b);
  CHECK(a != c);
  const auto layout = gpt_layout(g);
  auto stats = [&](const std::string& name) {
    for (const auto& t : layout)
      if (t.name == name) {
        double sum = 0, sq = 0;
        for (std::size_t i = 0; i < t.size; ++i) {
          sum += a[t.offset + i];
          sq += a[t.offset + i] * a[t.offset + i];
        }
        const double mean = sum / t.size;
        return std::make_pair(mean, std::sqrt(sq / t.size - mean * mean));
      }
    FAIL("no tensor " << name);
    return std::make_pair(0.0, 0.0);
  };
  CHECK(std::abs(stats("wte").first) < 1e-3);
  CHECK(stats("wte").second == doctest::Approx(0.02).epsilon(0.03));
  CHECK(stats("h.1.mlp.c_proj.weight").second == doctest::Approx(0.02 / std::sqrt(4.0)).epsilon(0.05));
  CHECK(stats("h.0.ln_1.weight") == std::make_pair(1.0, 0.0));
  CHECK(stats("h.0.attn.c_attn.bias") == std::make_pair(0.0, 0.0));
}

TEST_CASE("gpt: a token outside the vocabulary or a sequence longer than the block is refused") {
  auto k = kernels::make_cpu_kernels(1);
  Gpt gpt({16, 4, 1, 2, 8}, *k);
  gpt_initialize(gpt.config(), 3, gpt.params());
  const std::int32_t ok[4] = {1, 2, 3, 4}, bad[4] = {1, 2, 16, 4};
  CHECK(std::isfinite(gpt.forward(ok, ok, 1, 4)));
  CHECK_THROWS_WITH_AS(gpt.forward(bad, ok, 1, 4),
                       doctest::Contains("token or target 16 at position 2 is outside the vocabulary [0, 16)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(gpt.forward(ok, ok, 1, 5), doctest::Contains("at most the block size 4"), std::invalid_argument);
}

TEST_CASE("gpt: the optimizer decays matrices (embeddings included), never vectors") {
  const GptConfig g{16, 8, 1, 2, 4};
  const auto layout = gpt_layout(g);
  const auto decay = gpt_decay_layout(layout);
  REQUIRE(decay.size() == layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const std::size_t decayed = decay[i].bias - decay[i].weight;
    CHECK(decay[i].begin() == layout[i].offset);
    CHECK(decay[i].end() == layout[i].offset + layout[i].size);
    CHECK(decayed == (layout[i].shape.size() == 2 ? layout[i].size : 0));
  }
}

TEST_CASE("gpt: dropout masks follow the global window, and the gradient goes through them (finite differences)") {
  const GptConfig g{16, 8, 2, 2, 8};
  auto k = kernels::make_reference_kernels<float>();
  Gpt gpt(g, *k);
  gpt_initialize(g, 3, gpt.params());
  for (float& p : gpt.params()) p *= 3;  // gradients well above float rounding
  const int B = 2, T = 8;
  std::vector<std::int32_t> tokens(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<std::int32_t>(kernels::mix64(i) % 16);
    targets[i] = static_cast<std::int32_t>(kernels::mix64(i + 100) % 16);
  }
  const float scale = 1.0f / (B * T);
  const GptDropout drop{0.3f, 99, 40};
  const auto loss = [&](const GptDropout& d) {
    return gpt.forward_sums(tokens.data(), targets.data(), B, T, scale, d).loss_sum * scale;
  };
  const double plain = loss({}), dropped = loss(drop);
  CHECK(dropped != plain);
  CHECK(loss(drop) == dropped);            // the same windows, the same masks
  CHECK(loss({0.3f, 99, 41}) != dropped);  // other windows, other masks
  CHECK_THROWS_WITH_AS(loss({1.0f, 99, 0}), doctest::Contains("dropout 1: expected a probability in [0, 1)"),
                       std::invalid_argument);

  // The same check without dropout first: it validates the method (step, tolerance) itself.
  double worst = 0;
  for (const GptDropout& d : {GptDropout{}, drop}) {
    loss(d);
    gpt.backward();
    const std::vector<float> analytic = gpt.grads();
    for (const ParamTensor& t : gpt.layout()) {
      for (std::size_t j : {std::size_t{0}, t.size / 2, t.size - 1}) {
        float& p = gpt.params()[t.offset + j];
        const float saved = p, h = 1e-3f;
        p = saved + h;
        const double up = loss(d);
        p = saved - h;
        const double down = loss(d);
        p = saved;
        const double numeric = (up - down) / (2.0 * h);
        const double a = analytic[t.offset + j];
        const double error = std::abs(numeric - a) / std::max(1e-1, std::abs(numeric));
        worst = std::max(worst, error);
        INFO("dropout " << d.p << ", " << t.name << "[" << j << "]: analytic " << a << ", numeric " << numeric);
        CHECK(error < 1e-2);
      }
    }
  }
  MESSAGE("worst relative difference from finite differences: " << worst);
}

TEST_CASE("gpt: a step's gradients depend on its batch alone, not on the steps before it") {
  // The passes keep their buffers between steps; nothing of an earlier step may leak into a later one.
  const GptConfig g{16, 8, 2, 2, 8};
  auto k = kernels::make_cpu_kernels(1);
  Gpt gpt(g, *k);
  gpt_initialize(g, 5, gpt.params());
  const int B = 3, T = 8;
  const auto batch = [&](std::uint64_t salt) {
    std::vector<std::int32_t> v(B * T);
    for (int i = 0; i < B * T; ++i) v[i] = static_cast<std::int32_t>(kernels::mix64(salt + i) % 16);
    return v;
  };
  const auto tokens = batch(1), targets = batch(2), other_tokens = batch(3), other_targets = batch(4);
  const auto gradients = [&](const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y, int rows) {
    gpt.forward_sums(x.data(), y.data(), rows, T, 1.0f, {0.1f, 7, 0});
    gpt.backward();
    return gpt.grads();
  };
  const std::vector<float> first = gradients(tokens, targets, B);
  CHECK(gradients(other_tokens, other_targets, B) != first);
  gradients(other_tokens, other_targets, 1);  // a smaller batch in between, as evaluation slices are
  CHECK(gradients(tokens, targets, B) == first);
}
