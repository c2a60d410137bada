// gpt-step: the GPT model's training step on the CPU (train/gpt.h: forward, backward, AdamW with
// decay on matrices), on one process, against random tokens held in memory. Prints one line of
// key=value pairs: the best of --repeats timed runs of --steps steps (after --warmup), as tokens/s
// and milliseconds a step, and the share of forward, backward and the optimizer in it. The peer
// is bench/torch_gpt.py, the same model, batch and optimizer in PyTorch.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "train/gpt.h"
#include "train/optimizer.h"

using namespace slurm_train;

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  GptConfig config{256, 128, 4, 4, 128};
  int batch = 8, threads = 1, warmup = 2, steps = 5, repeats = 3;
  CLI::App app{"the GPT model's CPU training step, timed", "gpt-step"};
  app.add_option("--layers", config.layers)->capture_default_str();
  app.add_option("--heads", config.heads)->capture_default_str();
  app.add_option("--embd", config.embd)->capture_default_str();
  app.add_option("--seq", config.block, "sequence length (the block size)")->capture_default_str();
  app.add_option("--batch", batch, "sequences a step")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto kernels = kernels::make_cpu_kernels(threads);
  Gpt gpt(config, *kernels);
  gpt_initialize(config, 1, gpt.params());
  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 3e-4f;
  adamw.beta2 = 0.95f;
  adamw.weight_decay = 0.1f;
  Optimizer optimizer(adamw, gpt_decay_layout(gpt.layout()), gpt.params().size());
  const int T = config.block, n = batch * T;
  std::vector<std::int32_t> tokens(n), targets(n);
  for (int i = 0; i < n; ++i) {
    tokens[i] = static_cast<std::int32_t>(kernels::mix64(i) % 256);
    targets[i] = static_cast<std::int32_t>(kernels::mix64(i + n) % 256);
  }
  std::uint64_t step = 0;
  double phase[3] = {0, 0, 0};
  auto one_step = [&] {
    auto t0 = Clock::now();
    gpt.forward(tokens.data(), targets.data(), batch, T);
    auto t1 = Clock::now();
    gpt.backward();
    auto t2 = Clock::now();
    optimizer.update(*kernels, gpt.params(), gpt.grads(), adamw.lr, step++);
    auto t3 = Clock::now();
    phase[0] += std::chrono::duration<double>(t1 - t0).count();
    phase[1] += std::chrono::duration<double>(t2 - t1).count();
    phase[2] += std::chrono::duration<double>(t3 - t2).count();
  };
  for (int i = 0; i < warmup; ++i) one_step();
  double best = 1e30, best_phase[3] = {0, 0, 0};
  for (int r = 0; r < repeats; ++r) {
    std::fill(phase, phase + 3, 0.0);
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) one_step();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / steps;
    if (seconds < best) {
      best = seconds;
      std::copy(phase, phase + 3, best_phase);
    }
  }
  const double total = best_phase[0] + best_phase[1] + best_phase[2];
  std::printf("tokens_per_s=%.0f step_ms=%.2f forward=%.0f%% backward=%.0f%% optimizer=%.0f%% parameters=%zu\n",
              n / best, 1e3 * best, 100 * best_phase[0] / total, 100 * best_phase[1] / total,
              100 * best_phase[2] / total, gpt.params().size());
  return 0;
}
