// The sharded optimizer's pure parts (the cuts, the counts) and its numerics rules on one process:
// the norm from block sums equals the cpu kernels' whole-vector norm bit for bit, and an update
// of ranges equals the update of the whole. Several ranks: engine.bats (mpirun) and
// engine_slurm.bats (two nodes).
#include "train/steps/sharded_optimizer.h"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <span>

#include "kernels/kernels.h"
#include "test/unit/test_support.h"

using namespace slurm_train;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sharded optimizer: shards are whole blocks, as even as they divide, and cover the model") {
  CHECK(shard_cuts(100, 1, 8) == std::vector<std::size_t>{0, 100});
  CHECK(shard_cuts(100, 2, 8) == std::vector<std::size_t>{0, 56, 100});  // 13 blocks: 7 + 6
  CHECK(shard_cuts(100, 4, 8) == std::vector<std::size_t>{0, 32, 56, 80, 100});
  CHECK(shard_cuts(10, 4, 8) == std::vector<std::size_t>{0, 8, 10, 10, 10});  // two ranks get nothing
  for (int ranks : {1, 2, 3, 5, 16})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1333770}}) {
      const auto c = shard_cuts(n, ranks, 32768);
      REQUIRE(c.size() == static_cast<std::size_t>(ranks) + 1);
      CHECK(c.front() == 0);
      CHECK(c.back() == n);
      for (std::size_t r = 0; r + 1 < c.size(); ++r) {
        CHECK(c[r] <= c[r + 1]);
        CHECK((c[r] % 32768 == 0 || c[r] == n));
      }
    }
  testing::check_refused<std::invalid_argument>([] { shard_cuts(10, 0, 8); }, "at least one rank");
}

TEST_CASE("sharded optimizer: a bucket's counts are its overlap with each shard, in rank order") {
  const std::vector<std::size_t> cuts{0, 32, 56, 80, 100};
  CHECK(shard_counts(cuts, 0, 100) == std::vector<std::size_t>{32, 24, 24, 20});
  CHECK(shard_counts(cuts, 30, 60) == std::vector<std::size_t>{2, 24, 4, 0});
  CHECK(shard_counts(cuts, 90, 100) == std::vector<std::size_t>{0, 0, 0, 10});
}

TEST_CASE(
    "sharded optimizer: updates of ranges are the update of the whole, bit for bit, weights decaying and biases not") {
  const std::vector<LayerLayout> layers = mlp_layout({784, {300, 100}, 10});
  const std::size_t n = layers.back().end();
  for (const OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
    OptimizerConfig c;
    c.kind = kind;
    c.weight_decay = 0.1f;
    auto k = kernels::make_cpu_kernels();
    std::vector<float> whole = random_values(n, 1), parts = whole;
    const std::vector<float> grads = random_values(n, 2);
    std::vector<float> m1(n, 0.01f), v1(n, 0.02f), m2 = m1, v2 = v1;
    for (std::uint64_t step = 0; step < 3; ++step) {
      apply_update(c, layers, *k, whole.data(), grads.data(), m1.data(), v1.data(), 0, n, 1e-2f, step);
      // Cuts inside a weight matrix and across a layer's weight/bias boundary.
      const std::size_t cuts[] = {0, 1000, layers[0].bias + 7, layers[1].weight + 3, n};
      for (std::size_t i = 0; i + 1 < std::size(cuts); ++i)
        apply_update(c, layers, *k, parts.data(), grads.data() + cuts[i], m2.data() + cuts[i], v2.data() + cuts[i],
                     cuts[i], cuts[i + 1], 1e-2f, step);
    }
    CHECK(same_bits(whole, parts));
    CHECK(same_bits(m1, m2));
    if (kind == OptimizerKind::kAdamW) CHECK(same_bits(v1, v2));
  }
}

TEST_CASE("sharded optimizer: on one process its norm, clipping and update are the replicated path's, bit for bit") {
  // Several blocks of kSumOfSquaresBlock, and a last one partly filled.
  const std::vector<LayerLayout> layers = mlp_layout({784, {256, 128}, 10});
  const std::size_t n = layers.back().end();
  REQUIRE(n > 3 * kernels::kSumOfSquaresBlock);
  OptimizerConfig c;
  c.weight_decay = 0.05f;
  c.clip_norm = 0.5f;
  auto k = kernels::make_cpu_kernels();
  const auto comm = make_single_process_comm();
  ShardedOptimizer sharded(*comm, c, layers, n);
  Optimizer replicated(c, layers, n);
  // Small buckets: several reduce-scatters into the shard.
  GradientBuckets buckets(*comm, layers, 64 * 1024, sharded.gradient_shard());
  REQUIRE(buckets.buckets().size() > 1);
  const std::vector<float> start = random_values(n, 3);
  HostVector<float> p1(start.begin(), start.end()), p2 = p1;
  for (std::uint64_t step = 0; step < 3; ++step) {
    std::vector<float> g = random_values(n, 10 + static_cast<std::uint32_t>(step));
    g[5] = 3.0f;  // a norm above clip_norm: clipping scales
    for (std::size_t l = layers.size(); l-- > 0;) buckets.layer_done(g.data(), l);
    buckets.finish();
    const double norm_sharded = sharded.clip(*k, c.clip_norm);
    const double norm_replicated = clip_by_global_norm(*k, g, c.clip_norm);
    CHECK(std::memcmp(&norm_sharded, &norm_replicated, sizeof(double)) == 0);
    sharded.update(*k, p1, 1e-2f, step);
    replicated.update(*k, p2, g, 1e-2f, step);
    CHECK(same_bits(p1, p2));
  }
  HostVector<float> first, second;
  sharded.gather_state(first, second);
  CHECK(same_bits(first, replicated.first_state()));
  CHECK(same_bits(second, replicated.second_state()));
  CHECK(sharded.state_bytes() == replicated.state_bytes());
  // A resume's whole state taken back.
  ShardedOptimizer resumed(*comm, c, layers, n);
  resumed.take_state(first, second);
  HostVector<float> first_again, second_again;
  resumed.gather_state(first_again, second_again);
  CHECK(same_bits(first_again, first));
  testing::check_refused<std::invalid_argument>([&] { resumed.take_state({1.0f}, {1.0f}); },
                                                "the state to take holds 1 values for a model of");
}
