// gpt-step: the GPT's data-parallel training step, timed on every rank of an MPI job: the
// training loop's step (train/loop/trainer.cc driving CpuGptStep) without its data prefetcher:
// forward, backward with the bucketed gradient all-reduce, the loss all-reduce, clipping by the
// global norm, AdamW. The model, global batch and sequence are examples/gpt-tiny.toml's (4
// blocks, 4 heads, 128 wide, 32 windows of 128 bytes); each rank takes its exact slice of the
// global batch from windows of --data's training split (random bytes without it), as the
// PyTorch peer (bench/torch_gpt.py) does.
//
// Prints one line from rank 0, key=value pairs for bench/run.sh: the best of --repeats timed
// runs of --steps steps, as tokens/s and as the matrix products' GFLOP/s. A step's product work:
// forward 2 B T (12 C^2 L + C V) for the layers' weights and the tied head, plus 4 B S C L for
// the attention's scores and weighted values, S the scores per head that the products compute
// (kernels/cpu/attention_gemm.h: T^2 less the blocks above the diagonal); backward twice that.
// With --sgemm-n N, each timed run is followed by OpenBLAS sgemm of N x N matrices on the same
// threads, as much work as the run's (bench/square_sgemm.h).
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/square_sgemm.h"
#include "kernels/cpu/attention_gemm.h"
#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/data/batches.h"
#include "train/data/samples.h"
#include "train/data/token_dataset.h"
#include "train/steps/cpu_gpt_step.h"

using namespace slurm_train;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string data;  // a token file (slurm-train data import text); empty: random bytes
  GptConfig model{256, 128, 4, 4, 128};
  int global_batch = 32, threads = 1, warmup = 3, steps = 5, repeats = 3, sgemm_n = 0;
};

int run(const Options& o, Comm& comm) {
  const GptConfig& g = o.model;
  std::vector<std::uint8_t> tokens;
  if (!o.data.empty()) {
    tokens = load_token_split(o.data, "train");
  } else {
    tokens.resize(static_cast<std::size_t>(o.global_batch) * g.block * 4 + 1);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint8_t>(kernels::mix64(i) % 256);
  }
  const TokenWindows windows(std::move(tokens), g.block);
  const RowRange mine = rank_rows(static_cast<std::size_t>(o.global_batch), comm.rank(), comm.size());

  OptimizerConfig adamw;  // examples/gpt-tiny.toml's
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 2e-3f, adamw.beta2 = 0.99f, adamw.weight_decay = 0.1f, adamw.clip_norm = 1.0f;
  CpuGptStepOptions so;
  so.loss_scale = 1.0f / static_cast<float>(o.global_batch * g.block);
  CpuGptStep model(g, adamw, so, kernels::make_cpu_kernels(), 1337, &comm);

  Batch b;
  const std::size_t per_epoch = batches_per_epoch(windows.count(), static_cast<std::size_t>(o.global_batch));
  auto step = [&](std::uint64_t s) {
    windows.gather_range((s % per_epoch) * o.global_batch + mine.begin, mine.size(), b);
    model.forward({nullptr, b.y.data(), b.rows, s * o.global_batch + mine.begin, b.tokens.data()});
    model.backward();
    model.finish_gradients();
    double sums[2] = {model.local_loss().loss_sum, static_cast<double>(model.local_loss().correct)};
    comm.allreduce_sum(sums, 2);
    model.clip_gradients();
    model.update(adamw.lr, s);
  };

  std::unique_ptr<bench::SquareSgemm> sgemm;
  if (o.sgemm_n > 0 && comm.rank() == 0) sgemm = std::make_unique<bench::SquareSgemm>(o.sgemm_n);
  const double B = o.global_batch, T = g.block, C = g.embd, L = g.layers, V = g.vocab;
  const double S = static_cast<double>(kernels::attention_scores_computed(g.block));
  const double flops = 3 * (2 * B * T * (12 * C * C * L + C * V) + 4 * B * S * C * L);
  std::uint64_t s = 0;
  for (; s < static_cast<std::uint64_t>(o.warmup); ++s) step(s);
  if (sgemm) sgemm->run(0);  // warm-up
  double best = 1e30, sgemm_best = 0;
  for (int r = 0; r < o.repeats; ++r) {
    comm.barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < o.steps; ++i) step(s++);
    best = std::min(best, seconds_since(t0) / o.steps);
    if (sgemm) sgemm_best = std::max(sgemm_best, sgemm->run(flops * o.steps / comm.size()));
  }
  if (comm.rank() != 0) return 0;
  std::printf(
      "ranks=%d threads=%d params=%zu global_batch=%d seq=%d step_ms=%.2f tokens_per_s=%.0f gemm_gflops=%.2f "
      "gemm_gflop_per_step=%.3f",
      comm.size(), o.threads, model.host_state().params->size(), o.global_batch, g.block, 1e3 * best, B * T / best,
      flops / best / 1e9, flops / 1e9);
  if (sgemm) std::printf(" sgemm_n=%d sgemm_gflops=%.2f", o.sgemm_n, sgemm_best);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"the GPT's data-parallel training step (examples/gpt-tiny.toml's model), best of several timed runs",
               "gpt-step"};
  app.add_option("--data", o.data, "token file (its training split); random bytes if absent");
  app.add_option("--layers", o.model.layers)->capture_default_str();
  app.add_option("--heads", o.model.heads)->capture_default_str();
  app.add_option("--embd", o.model.embd)->capture_default_str();
  app.add_option("--seq", o.model.block, "sequence length (the block size)")->capture_default_str();
  app.add_option("--global-batch", o.global_batch, "sequences a step, split over the ranks")->capture_default_str();
  app.add_option("--threads", o.threads, "BLAS threads per rank")->capture_default_str();
  app.add_option("--warmup", o.warmup)->capture_default_str();
  app.add_option("--steps", o.steps)->capture_default_str();
  app.add_option("--repeats", o.repeats)->capture_default_str();
  app.add_option("--sgemm-n", o.sgemm_n, "after each timed run, time an n x n sgemm (rank 0); 0: none");
  CLI11_PARSE(app, argc, argv);

  MPI_Init(&argc, &argv);
  int rc = 1;
  {
    std::unique_ptr<Comm> comm = make_mpi_comm();
    openblas_set_num_threads(o.threads);
    try {
      rc = run(o, *comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpt_step: rank %d: %s\n", comm->rank(), e.what());
      if (comm->size() > 1) comm->abort(1);
    }
  }
  MPI_Finalize();
  return rc;
}
