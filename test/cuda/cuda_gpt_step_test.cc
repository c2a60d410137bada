// The GPT's GPU training step (CudaGptStep) against the CPU's: one pass's logits and gradients
// against Gpt's from the same parameters and windows, and whole steps driven through TrainStep
// as the training loop drives them against CpuGptStep's (fp32 with and without dropout, with and
// without the fused bias epilogues); evaluation; tf32 and bf16 within their precision; the state
// through host memory; the gradient reduction through a one-rank NCCL communicator, replicated
// and with the optimizer state sharded; bad input.
//
// Bounds: fp32 logits within 1e-5 and each gradient tensor within 1e-4 in scaled_error, losses
// and gradient norms within 1e-5 relative, parameters after the steps within 1e-5 scaled. The
// two CPU paths (reference kernels against OpenBLAS ones) differ on this recipe by at most 3e-7
// (logits), 9e-7 (a gradient tensor), 5e-8 (losses) and 1.2e-7 (parameters: an ulp of the
// LayerNorm weights); a wrong index, mask or tensor gives errors of order 1e-2 to 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/transformer_kernels.h"
#include "kernels/kernels.h"
#include "test/cuda/cuda_test_support.h"
#include "train/comm/comm_nccl.h"
#include "train/models/gpt.h"
#include "train/steps/cpu_gpt_step.h"
#include "train/steps/cuda_gpt_step.h"
#include "train/steps/optimizer.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;

constexpr double kLogitsBound = 1e-5, kGradientBound = 1e-4, kStepBound = 1e-5;

struct Recipe {
  GptConfig config{64, 16, 2, 2, 32};  // head size 16
  OptimizerConfig opt;
  float dropout = 0.0f;
  int rows = 6, steps = 4;
  int eval_rows = 15;  // over two of the GPU's slices of max_rows (= rows) windows, and a partial one
  int tokens() const { return rows * config.block; }
};

Recipe recipe(float dropout) {
  Recipe r;
  r.dropout = dropout;
  // Clipping active at every step (gradient norms 0.6 to 1.3 here). eps 1e-3, not 1e-8: with a
  // tiny eps Adam's first steps move a parameter by about lr * sign(g), so a gradient within
  // rounding of 0 becomes a full step either way on either device (the two CPU paths end up to
  // 8e-5 apart); the clipped gradients here are about 1e-3, so eps 1e-3 keeps the update smooth in g.
  r.opt.lr = 1e-2f, r.opt.weight_decay = 0.1f, r.opt.clip_norm = 0.3f, r.opt.eps = 1e-3f;
  return r;
}

std::uint64_t dropout_seed(std::uint64_t seed) { return seed ^ 0xd0; }

struct Windows {
  std::vector<std::int32_t> tokens, targets;
};

// rows windows of block random tokens, and random targets: both in [0, V).
Windows windows(const GptConfig& c, int rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Windows w;
  w.tokens.resize(std::size_t(rows) * c.block);
  w.targets.resize(w.tokens.size());
  for (auto& t : w.tokens) t = static_cast<std::int32_t>(rng() % std::uint64_t(c.vocab));
  for (auto& t : w.targets) t = static_cast<std::int32_t>(rng() % std::uint64_t(c.vocab));
  return w;
}

StepBatch batch(const Windows& w, int rows, std::uint64_t first_row) {
  return {nullptr, w.targets.data(), rows, first_row, w.tokens.data()};
}

HostVector<float> initial_params(const GptConfig& c, std::uint64_t seed) {
  HostVector<float> params;
  gpt_initialize(c, seed, params);
  return params;
}

CudaGptStepOptions gpu_options(const Recipe& r, std::uint64_t seed, cuda::Precision precision, bool fuse_bias = true) {
  CudaGptStepOptions o;
  o.precision = precision, o.max_rows = r.rows, o.loss_scale = 1.0f / float(r.tokens());
  o.dropout = r.dropout, o.dropout_seed = dropout_seed(seed), o.fuse_bias = fuse_bias;
  return o;
}

CpuGptStep cpu_step(const Recipe& r, std::uint64_t seed) {
  CpuGptStepOptions o;
  o.loss_scale = 1.0f / float(r.tokens()), o.dropout = r.dropout, o.dropout_seed = dropout_seed(seed);
  return CpuGptStep(r.config, r.opt, o, kernels::make_cpu_kernels(), seed, nullptr);
}

struct Run {
  std::vector<double> losses, norms;  // per step: the mean loss, the gradient norm before clipping
  HostVector<float> params;
  StepLoss eval;
};

// One step as the training loop runs it; returns the mean loss, records the norm.
double train_one(TrainStep& step, const Recipe& r, std::uint64_t seed, int s, std::vector<double>* norms = nullptr) {
  const Windows w = windows(r.config, r.rows, seed + 100 * std::uint64_t(s) + 1);
  step.forward(batch(w, r.rows, std::uint64_t(s) * r.rows));
  step.backward();
  step.finish_gradients();
  const double loss = step.local_loss().loss_sum / r.tokens();
  const double norm = step.clip_gradients();
  if (norms) norms->push_back(norm);
  step.update(r.opt.lr, std::uint64_t(s));
  return loss;
}

// The steps, with an evaluation between two of them (as the trainer's), which must not disturb them.
Run drive(TrainStep& step, const Recipe& r, std::uint64_t seed) {
  Run out;
  for (int s = 0; s < r.steps; ++s) {
    out.losses.push_back(train_one(step, r, seed, s, &out.norms));
    if (s == 1) {
      const Windows w = windows(r.config, r.eval_rows, seed + 7777);
      out.eval = step.evaluate(batch(w, r.eval_rows, 0));
    }
  }
  step.state_to_host();
  out.params = *step.host_state().params;
  return out;
}

Run train_gpu(const Recipe& r, std::uint64_t seed, cuda::Precision precision, bool fuse_bias = true) {
  CudaGptStep step(r.config, r.opt, gpu_options(r, seed, precision, fuse_bias), initial_params(r.config, seed));
  return drive(step, r, seed);
}

// One pass on the GPU against Gpt's from the same parameters: the logits, the loss, and every
// gradient tensor (each in its own scale: a wrong small tensor must not hide behind a large one).
void check_pass(const Recipe& r, std::uint64_t seed, bool fuse_bias) {
  const HostVector<float> init = initial_params(r.config, seed);
  CudaGptStep step(r.config, r.opt, gpu_options(r, seed, cuda::Precision::kFp32, fuse_bias), init);
  auto k = kernels::make_cpu_kernels();
  Gpt model(r.config, *k);
  model.params() = init;
  const Windows w = windows(r.config, r.rows, seed + 1);
  const std::uint64_t first_row = 5;  // not 0: the masks' positions start at window 5
  step.forward(batch(w, r.rows, first_row));
  const kernels::LossResult want =
      model.forward_sums(w.tokens.data(), w.targets.data(), r.rows, r.config.block, 1.0f / float(r.tokens()),
                         {r.dropout, dropout_seed(seed), first_row});
  const std::span<const float> logits = model.logits();
  CHECK(scaled_error(step.logits(), std::vector<float>(logits.begin(), logits.end())) < kLogitsBound);
  step.backward();
  model.backward();
  CHECK(step.local_loss().loss_sum == doctest::Approx(want.loss_sum).epsilon(kStepBound));
  const std::vector<float> grads = step.gradients();
  REQUIRE(grads.size() == model.grads().size());
  for (const ParamTensor& t : model.layout()) {
    CAPTURE(t.name);
    const auto at = [&](const std::vector<float>& g) {
      return std::vector<float>(g.begin() + std::ptrdiff_t(t.offset), g.begin() + std::ptrdiff_t(t.offset + t.size));
    };
    CHECK(scaled_error(at(grads), at(model.grads())) < kGradientBound);
  }
}

// The steps on the GPU in fp32 against CpuGptStep's.
void check_steps(const Recipe& r, std::uint64_t seed, bool fuse_bias) {
  auto cpu_model = cpu_step(r, seed);
  const Run cpu = drive(cpu_model, r, seed), gpu = train_gpu(r, seed, cuda::Precision::kFp32, fuse_bias);
  for (int s = 0; s < r.steps; ++s) {
    CAPTURE(s);
    CHECK(gpu.losses[s] == doctest::Approx(cpu.losses[s]).epsilon(kStepBound));
    CHECK(cpu.norms[s] > r.opt.clip_norm);  // the recipe's clipping is active
    CHECK(gpu.norms[s] == doctest::Approx(cpu.norms[s]).epsilon(kStepBound));
  }
  CHECK(scaled_error(gpu.params, cpu.params) < kStepBound);
  CHECK(gpu.eval.loss_sum == doctest::Approx(cpu.eval.loss_sum).epsilon(kStepBound));
}

TEST_CASE("cuda gpt step: fp32 matches Gpt's pass and CpuGptStep's steps, without dropout (fused bias and not)" *
          doctest::skip(no_gpu())) {
  for (bool fuse_bias : {true, false}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(fuse_bias);
    const Recipe r = recipe(0.0f);
    check_pass(r, seed, fuse_bias);
    check_steps(r, seed, fuse_bias);
  }
}

TEST_CASE("cuda gpt step: fp32 with dropout 0.1 matches too (the same counter-based masks)" * doctest::skip(no_gpu())) {
  for (bool fuse_bias : {true, false}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(fuse_bias);
    const Recipe r = recipe(0.1f);
    check_pass(r, seed, fuse_bias);
    check_steps(r, seed, fuse_bias);
  }
}

// Rows whose first arg-max could move onto or off the target when the logits move by delta: the
// target and another logit both within delta of the row's maximum.
long long tie_rows(std::span<const float> logits, const std::vector<std::int32_t>& targets, int V, double delta) {
  long long n = 0;
  for (std::size_t row = 0; row < targets.size(); ++row) {
    const float* z = logits.data() + row * std::size_t(V);
    const float max = *std::max_element(z, z + V);
    if (z[targets[row]] < max - delta) continue;
    for (int c = 0; c < V; ++c)
      if (c != targets[row] && z[c] >= max - delta) {
        ++n;
        break;
      }
  }
  return n;
}

TEST_CASE("cuda gpt step: evaluate() gives CpuGptStep's loss sum and correct count, in slices of max_rows" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const Recipe r = recipe(0.1f);  // dropout configured: evaluation must leave it out
  Windows w = windows(r.config, r.eval_rows, seed + 3);
  // Half the targets the model's own arg-max (logits do not depend on targets): a count of
  // about half the rows, not the 1 in V of random targets.
  auto k = kernels::make_cpu_kernels();
  Gpt model(r.config, *k);
  model.params() = initial_params(r.config, seed);
  model.forward_sums(w.tokens.data(), w.targets.data(), r.eval_rows, r.config.block, 0.0f);
  const std::span<const float> logits = model.logits();
  const int V = r.config.vocab;
  for (std::size_t row = 0; row < w.targets.size(); row += 2) {
    const float* z = logits.data() + row * std::size_t(V);
    w.targets[row] = static_cast<std::int32_t>(std::max_element(z, z + V) - z);
  }
  auto cpu_model = cpu_step(r, seed);
  CudaGptStep gpu_model(r.config, r.opt, gpu_options(r, seed, cuda::Precision::kFp32), initial_params(r.config, seed));
  const StepLoss cpu = cpu_model.evaluate(batch(w, r.eval_rows, 0)), gpu = gpu_model.evaluate(batch(w, r.eval_rows, 0));
  // Equal, but for rows where the target ties another logit for the maximum to within the logits'
  // bound: there the first arg-max may go either way by rounding alone (almost always none).
  double scale = 0;
  for (float z : logits) scale = std::max(scale, double(std::abs(z)));
  const long long ties = tie_rows(logits, w.targets, V, kLogitsBound * scale);
  CAPTURE(ties);
  CHECK(gpu.loss_sum == doctest::Approx(cpu.loss_sum).epsilon(kStepBound));
  CHECK(cpu.correct >= static_cast<long long>(w.targets.size() / 2) - ties);
  CHECK(std::abs(gpu.correct - cpu.correct) <= ties);
}

TEST_CASE("cuda gpt step: tf32 and bf16 losses stay within their precision of the fp32 CPU step" *
          doctest::skip(no_gpu())) {
  for (auto precision : {cuda::Precision::kTf32, cuda::Precision::kBf16}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(cuda::precision_name(precision));
    const Recipe r = recipe(0.0f);
    auto cpu_model = cpu_step(r, seed);
    const Run cpu = drive(cpu_model, r, seed), gpu = train_gpu(r, seed, precision);
    const double bound = precision == cuda::Precision::kBf16 ? 2e-2 : 5e-3;
    for (int s = 0; s < r.steps; ++s) {
      CAPTURE(s);
      CHECK(gpu.losses[s] == doctest::Approx(cpu.losses[s]).epsilon(bound));
    }
    CHECK(gpu.eval.loss_sum == doctest::Approx(cpu.eval.loss_sum).epsilon(bound));
  }
}

TEST_CASE("cuda gpt step: train_step() queues the same step as the phases" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const Recipe r = recipe(0.1f);
  const HostVector<float> init = initial_params(r.config, seed);
  CudaGptStepOptions o = gpu_options(r, seed, cuda::Precision::kFp32);
  o.deterministic = true;
  CudaGptStep phases(r.config, r.opt, o, init), queued(r.config, r.opt, o, init);
  for (int s = 0; s < r.steps; ++s) {
    CAPTURE(s);
    const double want = train_one(phases, r, seed, s);
    const Windows w = windows(r.config, r.rows, seed + 100 * std::uint64_t(s) + 1);
    queued.train_step(batch(w, r.rows, std::uint64_t(s) * r.rows), r.opt.lr, std::uint64_t(s));
    CHECK(queued.local_loss().loss_sum / r.tokens() == doctest::Approx(want).epsilon(kStepBound));
  }
  // Not asked bit for bit: the clipping factor may be worked out on the device in one, the host in the other.
  CHECK(scaled_error(queued.parameters(), phases.parameters()) < kStepBound);
}

TEST_CASE("cuda gpt step: its state through host memory continues the training bit for bit" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const Recipe r = recipe(0.1f);
  for (auto precision : {cuda::Precision::kFp32, cuda::Precision::kBf16}) {
    CAPTURE(cuda::precision_name(precision));
    CudaGptStepOptions o = gpu_options(r, seed, precision);
    o.deterministic = true;  // three instances must pick the same reductions
    const HostVector<float> init = initial_params(r.config, seed);
    // straight: never through the host; trip: to the host and back unchanged; resumed: from other
    // parameters, given trip's state as a resume from a checkpoint gives it.
    CudaGptStep straight(r.config, r.opt, o, init), trip(r.config, r.opt, o, init),
        resumed(r.config, r.opt, o, initial_params(r.config, seed + 1));
    for (int s = 0; s < 2; ++s) CHECK(train_one(trip, r, seed, s) == train_one(straight, r, seed, s));
    trip.state_to_host();
    const HostState from = trip.host_state(), to = resumed.host_state();
    CHECK(*from.params == trip.parameters());
    trip.state_from_host();
    *to.params = *from.params, *to.first = *from.first, *to.second = *from.second;
    resumed.state_from_host();
    for (int s = 2; s < 2 + r.steps; ++s) {
      CAPTURE(s);
      const double want = train_one(straight, r, seed, s);
      CHECK(train_one(trip, r, seed, s) == want);
      CHECK(train_one(resumed, r, seed, s) == want);
    }
    const HostVector<float> want = straight.parameters();
    CHECK(trip.parameters() == want);
    CHECK(resumed.parameters() == want);
  }
}

TEST_CASE("cuda gpt step: a one-rank NCCL gradient reduction changes no bit" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const Recipe r = recipe(0.0f);
  CudaGptStepOptions o = gpu_options(r, seed, cuda::Precision::kFp32);
  o.deterministic = true;  // two instances must pick the same reductions
  o.bucket_mb = 0.02;      // several buckets over the model's 110 KB of gradients
  const HostVector<float> init = initial_params(r.config, seed);
  CudaGptStep alone(r.config, r.opt, o, init), reduced(r.config, r.opt, o, init);
  const auto boot = make_single_process_comm();
  const auto nccl = make_nccl_comm(*boot, {0, reduced.stream(), std::chrono::seconds(60)});
  reduced.reduce_gradients_with(*nccl);
  for (int s = 0; s < r.steps; ++s) {
    CAPTURE(s);
    const Windows w = windows(r.config, r.rows, seed + 100 * std::uint64_t(s) + 1);
    for (CudaGptStep* step : {&alone, &reduced}) {
      step->forward(batch(w, r.rows, std::uint64_t(s) * r.rows));
      step->backward();
      step->finish_gradients();
    }
    CHECK(reduced.gradients() == alone.gradients());
    CHECK(reduced.local_loss().loss_sum == alone.local_loss().loss_sum);
    for (CudaGptStep* step : {&alone, &reduced}) {
      step->clip_gradients();
      step->update(r.opt.lr, std::uint64_t(s));
    }
  }
  CHECK(reduced.parameters() == alone.parameters());
}

TEST_CASE(
    "cuda gpt step: the optimizer sharded over a one-rank NCCL communicator: the replicated step's norms, "
    "parameters and state, bit for bit" *
    doctest::skip(no_gpu())) {
  // One rank holds the one shard: what this checks is the sharded path's own code (the
  // reduce-scatter into the shard, the norm by blocks through an all-reduce, the update of the
  // shard's runs, the all-gather, the bf16 copy refreshed after it, the state's way through the
  // host), which two ranks run the same way on their halves.
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const auto boot = make_single_process_comm();
  for (auto precision : {cuda::Precision::kFp32, cuda::Precision::kBf16})
    for (auto kind : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
      CAPTURE(cuda::precision_name(precision));
      CAPTURE(static_cast<int>(kind));
      Recipe r = recipe(0.1f);
      r.opt.kind = kind;
      r.opt.momentum = 0.9f;
      CudaGptStepOptions o = gpu_options(r, seed, precision);
      o.deterministic = true;  // the instances must pick the same reductions
      o.bucket_mb = 0.02;      // several buckets
      const HostVector<float> init = initial_params(r.config, seed);
      CudaGptStep replicated(r.config, r.opt, o, init), sharded(r.config, r.opt, o, init);
      const auto nccl_replicated = make_nccl_comm(*boot, {0, replicated.stream(), std::chrono::seconds(60)});
      const auto nccl_sharded = make_nccl_comm(*boot, {0, sharded.stream(), std::chrono::seconds(60)});
      replicated.reduce_gradients_with(*nccl_replicated);
      sharded.reduce_gradients_with(*nccl_sharded, true);
      CHECK(sharded.optimizer_state_bytes() == replicated.optimizer_state_bytes());
      std::vector<double> norms_replicated, norms_sharded;
      for (int s = 0; s < 2; ++s)
        CHECK(train_one(sharded, r, seed, s, &norms_sharded) == train_one(replicated, r, seed, s, &norms_replicated));
      CHECK(norms_sharded == norms_replicated);
      CHECK(sharded.parameters() == replicated.parameters());

      // The shard a checkpoint of the ranks writes: here the whole state, as the replicated step's.
      CHECK(!replicated.state_sharded());
      CHECK(!replicated.state_shard());
      replicated.state_to_host();
      const HostState whole = replicated.host_state();
      CHECK(sharded.state_sharded());
      CHECK_THROWS_AS(sharded.state_shard(), std::logic_error);  // a view: nothing copied yet
      sharded.shard_to_host();
      const std::optional<StateShard> shard = sharded.state_shard();
      REQUIRE(shard);
      CHECK(shard->begin == 0);
      CHECK(shard->end == whole.params->size());
      CHECK(*shard->params == *whole.params);
      CHECK(*shard->first == *whole.first);
      CHECK(*shard->second == *whole.second);
      // The whole moments gathered on rank 0.
      sharded.state_to_host();
      CHECK(*sharded.host_state().first == *whole.first);
      CHECK(*sharded.host_state().second == *whole.second);

      // A resume: another sharded step given the replicated step's state continues as both do.
      CudaGptStep resumed(r.config, r.opt, o, initial_params(r.config, seed + 1));
      const auto nccl_resumed = make_nccl_comm(*boot, {0, resumed.stream(), std::chrono::seconds(60)});
      resumed.reduce_gradients_with(*nccl_resumed, true);
      const HostState to = resumed.host_state();
      *to.params = *whole.params, *to.first = *whole.first, *to.second = *whole.second;
      resumed.state_from_host();
      for (int s = 2; s < 2 + r.steps; ++s) {
        CAPTURE(s);
        const double want = train_one(replicated, r, seed, s);
        CHECK(train_one(sharded, r, seed, s) == want);
        CHECK(train_one(resumed, r, seed, s) == want);
      }
      const HostVector<float> want = replicated.parameters();
      CHECK(sharded.parameters() == want);
      CHECK(resumed.parameters() == want);
    }
}

// The message of the std::invalid_argument or std::out_of_range f throws (the two a bad value
// may give; any other exception fails the case), or "" when it throws none.
template <typename F>
std::string bad_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::out_of_range& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("cuda gpt step: a token or target outside the vocabulary, too many rows, or too wide a head throw" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const Recipe r = recipe(0.0f);
  CudaGptStep step(r.config, r.opt, gpu_options(r, seed, cuda::Precision::kFp32), initial_params(r.config, seed));
  // As Gpt's CPU forward: checked on the host, the value named (the embedding kernel would read
  // the row a token names; a bad target would only give a NaN loss).
  Windows w = windows(r.config, r.rows, seed + 1);
  w.tokens[37] = 98765;
  std::string message = bad_argument_message([&] { step.forward(batch(w, r.rows, 0)); });
  CHECK_MESSAGE(message.find("98765") != std::string::npos, message);
  message = bad_argument_message([&] { step.evaluate(batch(w, r.rows, 0)); });
  CHECK_MESSAGE(message.find("98765") != std::string::npos, message);
  w = windows(r.config, r.rows, seed + 1);
  w.targets[50] = -4242;
  message = bad_argument_message([&] { step.forward(batch(w, r.rows, 0)); });
  CHECK_MESSAGE(message.find("-4242") != std::string::npos, message);

  const Windows more = windows(r.config, r.rows + 1, seed + 2);
  CHECK_THROWS_AS(step.forward(batch(more, r.rows + 1, 0)), std::invalid_argument);

  // Refused before anything ran: a good step follows.
  CHECK(std::isfinite(train_one(step, r, seed, 0)));

  const GptConfig wide{64, 16, 1, 1, cuda::kMaxAttentionHeadSize + 8};
  CHECK_THROWS_AS(CudaGptStep(wide, r.opt, gpu_options(r, seed, cuda::Precision::kFp32), initial_params(wide, seed)),
                  std::invalid_argument);
}

}  // namespace
