// gpt_trajectory: the engine's GPT training step (CpuGptStep, the trainer's) from its initial
// parameters, on one random batch repeated, with gpu_check gpt's recipe (AdamW, lr 6e-4, weight
// decay 0.1 on matrices, clipping at 1.0); each step's loss printed, and the initial parameters
// (/model/<name>, the checkpoint's names and shapes), the batch (/tokens, /targets) and the losses
// (/losses) written to --out for gpt_trajectory.py, which runs PyTorch from the same
// parameters on the same batch. Where two runs part, this says whether the step differs or only
// the starting point did.
#include <hdf5.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "train/io/h5.h"
#include "train/models/gpt.h"
#include "train/steps/cpu_gpt_step.h"

using namespace slurm_train;

namespace {

struct Options {
  GptConfig model{50304, 1024, 12, 12, 768};  // gpu_check gpt's: GPT-2 124M, its vocabulary padded
  int batch = 8, steps = 8, threads = 0;
  std::string out;
};

int run(const Options& o) {
  const GptConfig& g = o.model;
  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 6e-4f, adamw.weight_decay = 0.1f, adamw.clip_norm = 1.0f;
  CpuGptStepOptions so;
  const std::size_t n = static_cast<std::size_t>(o.batch) * static_cast<std::size_t>(g.block);
  so.loss_scale = 1.0f / static_cast<float>(n);
  CpuGptStep step(g, adamw, so, kernels::make_cpu_kernels(o.threads), 1337, nullptr);

  // gpu_check's batch: a stream of uniform tokens, the targets the next token of each.
  std::vector<std::int32_t> stream(n + 1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> token(0, g.vocab - 1);
  for (auto& t : stream) t = token(rng);

  h5::Handle file = h5::create_file(o.out);
  h5::write_int64_list_attribute(file, "config", {g.vocab, g.block, g.layers, g.heads, g.embd}, o.out);
  h5::Handle(H5_CHECK(H5Gcreate2(file, "/model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), o.out + ":/model"));
  const HostVector<float>& params = *step.host_state().params;
  for (const auto& t : gpt_layout(g))
    h5::write_float32(file, "/model/" + t.name, std::vector<hsize_t>(t.shape.begin(), t.shape.end()),
                      params.data() + t.offset, o.out);
  // Tokens as float32: exact below 2^24, and every vocabulary here is smaller.
  const std::vector<float> tokens(stream.begin(), stream.end() - 1), targets(stream.begin() + 1, stream.end());
  const std::vector<hsize_t> shape{static_cast<hsize_t>(o.batch), static_cast<hsize_t>(g.block)};
  h5::write_float32(file, "/tokens", shape, tokens.data(), o.out);
  h5::write_float32(file, "/targets", shape, targets.data(), o.out);

  std::vector<float> losses;
  for (int s = 0; s < o.steps; ++s) {
    const auto at = static_cast<std::uint64_t>(s);
    step.forward({nullptr, stream.data() + 1, o.batch, at * static_cast<std::uint64_t>(o.batch), stream.data()});
    step.backward();
    step.finish_gradients();
    const double norm = step.clip_gradients();
    step.update(adamw.lr, at);
    losses.push_back(static_cast<float>(step.local_loss().loss_sum / static_cast<double>(n)));
    std::printf("step %d loss %.6f grad_norm %.4f\n", s, losses.back(), norm);
    std::fflush(stdout);
  }
  h5::write_float32(file, "/losses", {losses.size()}, losses.data(), o.out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "the engine's GPT step from its initial parameters on one repeated random batch, for "
      "gpt_trajectory.py",
      "gpt_trajectory"};
  app.add_option("--vocab", o.model.vocab)->capture_default_str();
  app.add_option("--seq", o.model.block, "sequence length (the block size)")->capture_default_str();
  app.add_option("--layers", o.model.layers)->capture_default_str();
  app.add_option("--heads", o.model.heads)->capture_default_str();
  app.add_option("--embd", o.model.embd)->capture_default_str();
  app.add_option("--batch", o.batch, "windows of --seq tokens")->capture_default_str();
  app.add_option("--steps", o.steps)->capture_default_str();
  app.add_option("--threads", o.threads, "BLAS threads (0: OpenBLAS's own count)")->capture_default_str();
  app.add_option("--out", o.out, "the HDF5 file to write")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_trajectory: %s\n", e.what());
    return 1;
  }
}
