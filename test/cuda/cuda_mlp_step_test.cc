// The GPU training step against the CPU step (CpuMlpStep, the trainer's), both driven through
// TrainStep as the training loop drives them, from the same initial parameters on the same random batches: fp32 with
// and without dropout, with and without the fused epilogues; bf16 within its precision; evaluation; and the gradient
// reduction through a one-rank NCCL communicator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "test/cuda/cuda_test_support.h"
#include "train/comm/comm_nccl.h"
#include "train/models/mlp.h"
#include "train/steps/cpu_mlp_step.h"
#include "train/steps/cuda_mlp_step.h"
#include "train/steps/optimizer.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;

struct Recipe {
  MlpShape shape;
  OptimizerConfig opt;
  float smoothing = 0.1f;
  int rows = 40, steps = 6;
};

Recipe recipe(float dropout) {
  Recipe r;
  r.shape.inputs = 50, r.shape.hidden = {64, 36}, r.shape.classes = 10, r.shape.dropout = dropout;
  r.opt.lr = 1e-2f, r.opt.weight_decay = 0.05f, r.opt.clip_norm = 0.5f;  // clipping active
  return r;
}

struct Losses {
  std::vector<double> per_step;
  HostVector<float> params;
  double eval_loss = 0;
  long long eval_correct = 0;
};

// Batch s: rows x inputs in [-2, 2), labels; the same for both paths.
void batch(const Recipe& r, int s, std::uint64_t seed, std::vector<float>& x, std::vector<std::int32_t>& y) {
  x = uniform<float>(std::size_t(r.rows) * r.shape.inputs, seed + 100 * s, -2, 2);
  y.resize(r.rows);
  for (int i = 0; i < r.rows; ++i) y[i] = static_cast<std::int32_t>((seed >> 3) + 7 * i + s) % r.shape.classes;
}

CpuMlpStepOptions step_options(const Recipe& r, std::uint64_t seed) {
  CpuMlpStepOptions o;
  o.label_smoothing = r.smoothing, o.loss_scale = 1.0f / r.rows, o.dropout_seed = seed ^ 0xd0;
  return o;
}

// The steps as the training loop drives any TrainStep; the evaluation on a batch of its own.
Losses drive(TrainStep& step, const Recipe& r, std::uint64_t seed) {
  Losses out;
  std::vector<float> x;
  std::vector<std::int32_t> y;
  for (int s = 0; s < r.steps; ++s) {
    batch(r, s, seed, x, y);
    step.forward({x.data(), y.data(), r.rows, std::uint64_t(s) * r.rows});
    step.backward();
    step.finish_gradients();
    out.per_step.push_back(step.local_loss().loss_sum / r.rows);
    step.clip_gradients();
    step.update(r.opt.lr, s);
  }
  step.state_to_host();
  out.params = *step.host_state().params;
  batch(r, 99, seed, x, y);
  const StepLoss e = step.evaluate({x.data(), y.data(), r.rows});
  out.eval_loss = e.loss_sum, out.eval_correct = e.correct;
  return out;
}

Losses train_cpu(const Recipe& r, std::uint64_t seed) {
  CpuMlpStep step(r.shape, r.opt, step_options(r, seed), kernels::make_cpu_kernels(), seed, nullptr);
  return drive(step, r, seed);
}

Losses train_gpu(const Recipe& r, std::uint64_t seed, cuda::Precision precision, bool fuse, Comm* comm = nullptr,
                 bool deterministic = false) {
  auto k = kernels::make_reference_kernels<float>();
  Mlp<float> init(r.shape, *k);
  init.initialize(seed);
  const CpuMlpStepOptions so = step_options(r, seed);
  CudaMlpStepOptions o;
  o.precision = precision, o.max_rows = r.rows, o.label_smoothing = so.label_smoothing, o.fuse_epilogues = fuse;
  o.loss_scale = so.loss_scale, o.dropout_seed = so.dropout_seed;
  o.deterministic = deterministic;
  CudaMlpStep step(r.shape, r.opt, o, init.params());
  std::unique_ptr<Comm> nccl;
  if (comm) {
    nccl = make_nccl_comm(*comm, {0, step.stream(), std::chrono::seconds(60)});
    step.reduce_gradients_with(*nccl);
  }
  return drive(step, r, seed);
}

TEST_CASE("cuda step: fp32 follows the CPU path step by step (dropout on and off, fused and not)" *
          doctest::skip(no_gpu())) {
  for (float dropout : {0.0f, 0.3f}) {
    for (bool fuse : {true, false}) {
      const std::uint64_t seed = fresh_seed() % 100000;
      CAPTURE(seed);
      CAPTURE(dropout);
      CAPTURE(fuse);
      const Recipe r = recipe(dropout);
      const Losses cpu = train_cpu(r, seed), gpu = train_gpu(r, seed, cuda::Precision::kFp32, fuse);
      for (int s = 0; s < r.steps; ++s) {
        CAPTURE(s);
        CHECK(gpu.per_step[s] == doctest::Approx(cpu.per_step[s]).epsilon(1e-5));
      }
      // Parameters: Adam's first steps move each by about lr * sign(g), so a gradient within
      // rounding of 0 may go either way on either device; a handful such is no error, a wrong
      // layer or mask would be thousands.
      double scale = 0;
      for (float p : cpu.params) scale = std::max(scale, double(std::abs(p)));
      std::size_t apart = 0;
      for (std::size_t i = 0; i < cpu.params.size(); ++i)
        apart += std::abs(gpu.params[i] - cpu.params[i]) > 1e-4 * scale;
      CHECK(apart <= cpu.params.size() / 1000);
      CHECK(gpu.eval_loss == doctest::Approx(cpu.eval_loss).epsilon(1e-4));
    }
  }
}

TEST_CASE("cuda step: tf32 and bf16 stay within their precision of the CPU path" * doctest::skip(no_gpu())) {
  for (auto precision : {cuda::Precision::kTf32, cuda::Precision::kBf16}) {
    const std::uint64_t seed = fresh_seed() % 100000;
    CAPTURE(seed);
    CAPTURE(cuda::precision_name(precision));
    Recipe r = recipe(0.0f);
    r.opt.lr = 1e-3f;  // smaller steps: fewer gradients of rounding size turned into full steps
    const Losses cpu = train_cpu(r, seed), gpu = train_gpu(r, seed, precision, true);
    const double bound = precision == cuda::Precision::kBf16 ? 3e-2 : 5e-3;
    for (int s = 0; s < r.steps; ++s) {
      CAPTURE(s);
      CHECK(gpu.per_step[s] == doctest::Approx(cpu.per_step[s]).epsilon(bound));
    }
  }
}

TEST_CASE("cuda step: a one-rank NCCL gradient reduction changes no bit" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed() % 100000;
  CAPTURE(seed);
  const Recipe r = recipe(0.0f);
  const auto boot = make_single_process_comm();
  const Losses alone = train_gpu(r, seed, cuda::Precision::kFp32, true);
  const Losses reduced = train_gpu(r, seed, cuda::Precision::kFp32, true, boot.get());
  CHECK(reduced.params == alone.params);
}

TEST_CASE("cuda step: deterministic mode gives the same parameters, bit for bit, run after run" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed() % 100000;
  CAPTURE(seed);
  Recipe r = recipe(0.0f);
  r.rows = 256;  // enough rows for cuBLASLt to consider splitting the weight gradients' reduction
  for (auto precision : {cuda::Precision::kFp32, cuda::Precision::kBf16}) {
    CAPTURE(cuda::precision_name(precision));
    const Losses first = train_gpu(r, seed, precision, true, nullptr, true);
    const Losses second = train_gpu(r, seed, precision, true, nullptr, true);
    CHECK(first.params == second.params);
    CHECK(first.per_step == second.per_step);
  }
}

TEST_CASE("cuda step: its state through host memory continues the training bit for bit, as a resume does" *
          doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed() % 100000;
  CAPTURE(seed);
  const Recipe r = recipe(0.3f);
  for (auto precision : {cuda::Precision::kFp32, cuda::Precision::kBf16}) {
    CAPTURE(cuda::precision_name(precision));
    auto k = kernels::make_reference_kernels<float>();
    Mlp<float> init(r.shape, *k), other(r.shape, *k);
    init.initialize(seed);
    other.initialize(seed + 1);
    const CpuMlpStepOptions so = step_options(r, seed);
    CudaMlpStepOptions o;
    o.precision = precision, o.max_rows = r.rows, o.label_smoothing = so.label_smoothing;
    o.loss_scale = so.loss_scale, o.dropout_seed = so.dropout_seed, o.deterministic = true;
    CudaMlpStep straight(r.shape, r.opt, o, init.params()), first(r.shape, r.opt, o, init.params()),
        resumed(r.shape, r.opt, o, other.params());
    std::vector<float> x;
    std::vector<std::int32_t> y;
    auto step = [&](CudaMlpStep& st, int s) {
      batch(r, s, seed, x, y);
      st.train_step(x.data(), y.data(), r.rows, std::uint64_t(s) * r.rows, r.opt.lr, s);
      return st.local_loss().loss_sum;
    };
    for (int s = 0; s < 3; ++s) CHECK(step(first, s) == step(straight, s));
    first.state_to_host();
    const HostState from = first.host_state(), to = resumed.host_state();
    *to.params = *from.params, *to.first = *from.first, *to.second = *from.second;
    resumed.state_from_host();
    for (int s = 3; s < 6; ++s) CHECK(step(resumed, s) == step(straight, s));
    CHECK(resumed.parameters() == straight.parameters());
  }
}

}  // namespace
