// train-step: the engine's training step on data held in memory, timed on every rank of an MPI
// job. The step is the training loop's (train/loop/trainer.cc, driving CpuMlpStep) without its data
// prefetcher: forward, softmax cross-entropy, backward with the bucketed gradient all-reduce,
// the loss all-reduce, clipping by global norm, the optimizer. Each rank gathers its rows of the global batch from an
// in-memory, normalised copy of the data, as the PyTorch peer (bench/torch_mlp.py) does.
//
// Prints one line from rank 0, `key=value` pairs for bench/run.sh: the best of --repeats timed
// runs of --steps steps (after --warmup steps), as samples/s and as GEMM GFLOP/s, where the
// GEMM work of a step is 2 * B * sum(in * out) for forward, the same for the weight gradients,
// and the same less the first layer for the input gradients (the data needs no gradient).
//
// With --sgemm-n N, each timed run is followed by OpenBLAS sgemm products of two N x N matrices
// on the same threads, as many as make up the run's GEMM work (at least one), and the line also
// gives their best GFLOP/s: the ceiling that the step's rate is a fraction of, timed over the
// same work and alternating with the steps, so that both see the same machine load.
#include <cblas.h>
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "bench/square_sgemm.h"
#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/data/batches.h"
#include "train/data/dataset.h"
#include "train/loop/step_phases.h"
#include "train/loop/stop_votes.h"
#include "train/steps/cpu_mlp_step.h"
#include "train/steps/optimizer.h"

using namespace slurm_train;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string data;  // an HDF5 file as `slurm-train data import` writes; empty: synthetic data
  std::string hidden = "1024,512";
  int inputs = 784, classes = 10, synthetic_samples = 8192;
  int global_batch = 256, threads = 1, warmup = 10, steps = 20, repeats = 5;
  float dropout = 0.2f, label_smoothing = 0.1f, clip_norm = 5.0f;
  double bucket_mb = 4.0;
  int sgemm_n = 0;
  bool phases = false;
};

// Normalised features [count, inputs] and labels, the same on every rank.
struct Samples {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  int inputs = 0;
  std::size_t count() const { return y.size(); }
};

Samples load_samples(const Options& o) {
  Samples s;
  if (!o.data.empty()) {
    const Dataset d = load_dataset({o.data, "/images", "/labels", o.classes});
    const Normalization norm = normalization_of(d);
    s.inputs = static_cast<int>(d.feature_size);
    s.x.resize(d.count * d.feature_size);
    for (std::size_t i = 0; i < d.count; ++i)
      for (std::size_t j = 0; j < d.feature_size; ++j)
        s.x[i * d.feature_size + j] = (d.raw(i, j) - norm.mean) * norm.inv_stddev;
    s.y = d.labels;
    return s;
  }
  s.inputs = o.inputs;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  s.x.resize(static_cast<std::size_t>(o.synthetic_samples) * o.inputs);
  for (auto& v : s.x) v = normal(rng);
  for (int i = 0; i < o.synthetic_samples; ++i) s.y.push_back(static_cast<std::int32_t>(rng() % o.classes));
  return s;
}

std::vector<int> parse_widths(const std::string& text) {
  std::vector<int> widths;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) widths.push_back(std::stoi(item));
  return widths;
}

double gemm_flops_per_step(const std::vector<LayerLayout>& layers, int global_batch) {
  double flops = 0;
  for (std::size_t l = 0; l < layers.size(); ++l)
    flops += (l == 0 ? 4.0 : 6.0) * global_batch * layers[l].in * static_cast<double>(layers[l].out);
  return flops;
}

// CPU time of every thread of this process (OpenBLAS's included).
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct PhaseTimes {
  double forward = 0, backward = 0, comm = 0, optimizer = 0;
};

int run(const Options& o, Comm& comm) {
  openblas_set_num_threads(o.threads);
  const Samples samples = load_samples(o);
  const std::size_t batches = batches_per_epoch(samples.count(), static_cast<std::size_t>(o.global_batch));
  if (batches == 0) throw std::invalid_argument("--global-batch is larger than the data");
  const std::vector<std::uint32_t> order = epoch_permutation(42, 0, samples.count());
  const RowRange mine = rank_rows(static_cast<std::size_t>(o.global_batch), comm.rank(), comm.size());

  MlpShape shape{samples.inputs, parse_widths(o.hidden), o.classes, kernels::Activation::kRelu, o.dropout};
  OptimizerConfig opt;
  opt.kind = OptimizerKind::kAdamW;
  opt.weight_decay = 0.05f;
  opt.schedule = Schedule::kWarmupCosine;
  opt.warmup_steps = 200;
  opt.clip_norm = o.clip_norm;
  CpuMlpStepOptions so;
  so.label_smoothing = o.label_smoothing;
  so.loss_scale = 1.0f / static_cast<float>(o.global_batch);
  so.dropout_seed = 7;
  so.bucket_mb = o.bucket_mb;
  CpuMlpStep model(shape, opt, so, kernels::make_cpu_kernels(), 42, &comm);
  const std::uint64_t total_steps = static_cast<std::uint64_t>(o.warmup + o.steps * o.repeats);
  std::vector<float> x(mine.size() * samples.inputs);
  std::vector<std::int32_t> y(mine.size());
  PhaseTimes times;
  const StepPhases::OnPhase no_hooks;

  // As the training loop's step (train/loop/trainer.cc), its loss all-reduce as wide.
  auto step = [&](std::uint64_t s) {
    const std::size_t first = (s % batches) * static_cast<std::size_t>(o.global_batch) + mine.begin;
    for (std::size_t r = 0; r < mine.size(); ++r) {
      const std::uint32_t i = order[first + r];
      std::copy_n(&samples.x[std::size_t(i) * samples.inputs], samples.inputs, &x[r * samples.inputs]);
      y[r] = samples.y[i];
    }
    StepPhases phases(no_hooks, s);
    phases.enter(TrainPhase::kForward, &times.forward);
    model.forward({x.data(), y.data(), static_cast<int>(mine.size()), first});
    phases.enter(TrainPhase::kBackward, &times.backward);
    model.backward();
    phases.enter(TrainPhase::kAllreduce, &times.comm);
    model.finish_gradients();
    const StepLoss local = model.local_loss();
    double sums[2 + kStopVoteSlots] = {local.loss_sum, static_cast<double>(local.correct)};
    comm.allreduce_sum(sums, std::size(sums));
    phases.enter(TrainPhase::kOptimizer, &times.optimizer);
    model.clip_gradients();
    model.update(learning_rate_at(opt, s, total_steps), s);
  };

  std::unique_ptr<bench::SquareSgemm> sgemm;
  if (o.sgemm_n > 0 && comm.rank() == 0) sgemm = std::make_unique<bench::SquareSgemm>(o.sgemm_n);
  double sgemm_best = 0;
  std::uint64_t s = 0;
  for (; s < static_cast<std::uint64_t>(o.warmup); ++s) step(s);
  const double flops = gemm_flops_per_step(model.model_layout().layers, o.global_batch);
  if (sgemm) sgemm->run(0);  // warm-up
  times = {};
  double best = 1e30, cpu_seconds = 0;
  for (int r = 0; r < o.repeats; ++r) {
    comm.barrier();
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    for (int i = 0; i < o.steps; ++i) step(s++);
    best = std::min(best, seconds_since(t0) / o.steps);
    cpu_seconds += process_cpu_seconds() - cpu0;
    if (sgemm) sgemm_best = std::max(sgemm_best, sgemm->run(flops * o.steps));
  }
  const double cpu_per_step = cpu_seconds / (static_cast<double>(o.steps) * o.repeats);
  if (comm.rank() != 0) return 0;
  std::printf(
      "ranks=%d threads=%d params=%zu global_batch=%d step_ms=%.3f samples_per_s=%.1f gemm_gflops=%.2f "
      "gemm_gflop_per_step=%.3f rank0_cpu_ms_per_step=%.3f",
      comm.size(), o.threads, model.host_state().params->size(), o.global_batch, 1e3 * best, o.global_batch / best,
      flops / best / 1e9, flops / 1e9, 1e3 * cpu_per_step);
  if (sgemm) std::printf(" sgemm_n=%d sgemm_gflops=%.2f", o.sgemm_n, sgemm_best);
  if (o.phases) {
    const double n = static_cast<double>(o.steps) * o.repeats / 1e3;
    std::printf(" forward_ms=%.3f backward_ms=%.3f comm_ms=%.3f optimizer_ms=%.3f", times.forward / n,
                times.backward / n, times.comm / n, times.optimizer / n);
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"the engine's training step on in-memory data, best of several timed runs"};
  app.add_option("--data", o.data, "HDF5 training file (/images, /labels); synthetic data if absent");
  app.add_option("--hidden", o.hidden, "hidden widths, comma-separated");
  app.add_option("--inputs", o.inputs, "input width of synthetic data");
  app.add_option("--classes", o.classes, "classes");
  app.add_option("--synthetic-samples", o.synthetic_samples, "samples of synthetic data");
  app.add_option("--global-batch", o.global_batch, "global batch, split over the ranks");
  app.add_option("--threads", o.threads, "BLAS threads per rank");
  app.add_option("--dropout", o.dropout, "dropout after each hidden layer");
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket size");
  app.add_option("--warmup", o.warmup, "untimed steps first");
  app.add_option("--steps", o.steps, "steps per timed run");
  app.add_option("--repeats", o.repeats, "timed runs; the best is reported");
  app.add_option("--sgemm-n", o.sgemm_n, "after each timed run, time an n x n sgemm (rank 0); 0: none");
  app.add_flag("--phases", o.phases, "also print the mean time of each phase of the step");
  CLI11_PARSE(app, argc, argv);

  MPI_Init(&argc, &argv);
  int rc = 1;
  {
    std::unique_ptr<Comm> comm = make_mpi_comm();
    try {
      rc = run(o, *comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "train_step: rank %d: %s\n", comm->rank(), e.what());
      if (comm->size() > 1) comm->abort(1);
    }
  }
  MPI_Finalize();
  return rc;
}
