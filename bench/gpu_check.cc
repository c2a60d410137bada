// gpu-check: the GPU training step against the CPU path, and its speed (scripts/gpu-check.sh).
//
//   gpu_check train --data DIR [--precision fp32|bf16] [--steps 200] [--dropout 0.2] ...
//     Trains the same model from the same initial parameters on the same batches (BatchPrefetcher,
//     one rank) on the CPU (CpuMlpStep, the training loop's) and on the GPU (CudaMlpStep), both
//     driven through TrainStep as the loop drives it, then evaluates both on the test set. Prints a loss line
//     every 20 steps and one verdict line: fp32 passes when the losses of each of the first
//     --exact-steps (20) agree within --loss-rtol (1e-5) relative and the final test accuracies
//     within --acc-points (0.5); bf16 on the accuracies alone. Past the first steps AdamW
//     amplifies rounding differences about 30-fold every 10 steps, the CPU path's own too (two of
//     OpenBLAS's kernels part by 3e-2 within 200 steps), so the later steps' worst difference is
//     printed, not bounded. Exit 0 pass, 1 fail. Also prints the CRC-32 of the final GPU parameters
//     (two --deterministic runs must agree on it).
//   gpu_check bench [--precision bf16] [--width 4096] [--layers 4] [--batch 4096] [--steps 20]
//     An MLP of `layers` Linear layers width x width (ReLU between, AdamW, cross-entropy over
//     `width` classes), synthetic data resident on the GPU, timed over --steps steps after
//     --warmup; then the cuBLASLt matmul ceiling in the same precision (batch x width x width
//     products, timed the same way). Prints key=value lines for the script's table.
//   gpu_check gpt [--precision bf16] [--batch 8] [--steps 20] [--block 1024] [--layers 12] ...
//     GPT-2 124M's training step (CudaGptStep: forward, backward, clipping at 1.0, AdamW) on random
//     tokens, timed with CUDA events over --steps steps after --warmup. Prints one line
//       engine_gpt precision=bf16 ... tokens_per_s=... step_ms=... mfu=... loss=...
//     (mfu in percent of --peak-tflops; bench/torch_gpt_gpu.py prints the same fields). Exit 1 when
//     the last step's loss is not finite. --kernel-times N: then N more steps recorded through
//     CUPTI (bench/kernel_times.h), and a table of the GPU time per step by kernel, largest first.
//   gpu_check telemetry [--seconds 30]
//     slurm-train's GPU telemetry (GpuSampler, as each rank samples) against nvidia-smi on the
//     first GPU given, once a second while bf16 products keep it busy: utilisation within 10
//     points (9 pairs in 10), mean power within 5%, the energy counter's increase within 2% of
//     nvidia-smi's power integrated (bench/telemetry_agreement.h). Exit 0 when all three hold.
//   gpu_check gpt-vs-cpu [--precision fp32] [--batch 2] [--steps 3] [--block 1024] ...
//     The same GPT (GPT-2 124M's shape by default) from the same initial parameters, trained on
//     the CPU (CpuGptStep) and the GPU (CudaGptStep) for --steps steps on one random batch: the
//     GPU step at full size against the reference, where gpt-tiny's checks cannot reach (a
//     vocabulary of 50304, 16 attention tiles a sequence). Prints every step's losses and one
//     verdict line: every step within --loss-rtol relative (default 1e-4 in fp32, 2e-2 in bf16).
//     Exit 0 pass, 1 fail.
//
// Built in every build; without CUDA it says so and exits 2.
#include <CLI/CLI.hpp>

#include <cstdio>

#if defined(SLURM_TRAIN_WITH_CUDA)
#include <cblas.h>
#include <cuda_runtime.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/kernel_times.h"
#include "bench/telemetry_agreement.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/lt_matmul.h"
#include "kernels/kernels.h"
#include "launcher/gpu_sampler.h"
#include "train/data/batches.h"
#include "train/data/dataset.h"
#include "train/data/prefetcher.h"
#include "train/loop/evaluation.h"
#include "train/models/gpt.h"
#include "train/models/mlp.h"
#include "train/steps/cpu_gpt_step.h"
#include "train/steps/cpu_mlp_step.h"
#include "train/steps/cuda_gpt_step.h"
#include "train/steps/cuda_mlp_step.h"
#include "train/steps/device_batches.h"
#include "train/steps/optimizer.h"

using namespace slurm_train;
using slurm_train::bench::KernelTime;
using slurm_train::bench::KernelTimes;

namespace {

struct TrainOptions {
  std::string data, precision = "fp32", hidden = "1024,512";
  int steps = 200, batch = 256, eval_batch = 1000;
  float dropout = 0.2f, label_smoothing = 0.1f, clip = 5.0f, lr = 1e-3f, weight_decay = 0.01f;
  std::int64_t seed = 42;
  double loss_rtol = 1e-5, acc_points = 0.5;
  int exact_steps = 20;
  bool fuse = true, deterministic = false;
};

struct BenchOptions {
  std::string precision = "bf16";
  int width = 4096, layers = 4, batch = 4096, steps = 20, warmup = 5;
  bool deterministic = false;
};

struct GptAgainstCpuOptions {
  std::string precision = "fp32";
  GptConfig model{50304, 1024, 12, 12, 768};
  int batch = 2, steps = 3;
  double loss_rtol = 0;  // 0: by the precision
};

struct GptBenchOptions {
  std::string precision = "bf16";
  // GPT-2 124M, its vocabulary of 50257 padded to 50304 (a multiple of 64) as nanoGPT pads it:
  // an odd leading dimension leaves cuBLASLt few bf16 kernels for the head.
  GptConfig model{50304, 1024, 12, 12, 768};
  int batch = 8, steps = 20, warmup = 3;
  double peak_tflops = 0;  // 0: by the device's name
  bool deterministic = false;
  bool flash_attention = true;
  int kernel_times = 0;  // steps recorded for the kernel table (0: none)
};

cuda::Precision precision_of(const std::string& name) {
  if (name == "fp32") return cuda::Precision::kFp32;
  if (name == "tf32") return cuda::Precision::kTf32;
  if (name == "bf16") return cuda::Precision::kBf16;
  throw std::invalid_argument("--precision '" + name + "': expected fp32, tf32 or bf16");
}

std::vector<int> widths(const std::string& list) {
  std::vector<int> out;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');)
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

// Test loss and accuracy of a step over the whole test set.
std::pair<double, double> test_metrics(TrainStep& step, const Samples& test, int eval_batch) {
  const StepLoss r = evaluate_rows(step, test, {0, test.count()}, eval_batch);
  const auto n = static_cast<double>(test.count());
  return {r.loss_sum / n, static_cast<double>(r.correct) / n};
}

// One step as the training loop drives it (train/loop/trainer.cc), on one rank: the loss sum.
double drive_step(TrainStep& step, const StepBatch& b, float lr, std::uint64_t s) {
  step.forward(b);
  step.backward();
  step.finish_gradients();
  const StepLoss loss = step.local_loss();
  step.clip_gradients();
  step.update(lr, s);
  return loss.loss_sum;
}

int run_train(const TrainOptions& o) {
  const Dataset train_set = load_dataset({o.data + "/train.h5", "/images", "/labels", 10});
  const Normalization norm = normalization_of(train_set);
  const LabelledSamples train_rows(train_set, norm);
  const LabelledSamples test_rows(load_dataset({o.data + "/test.h5", "/images", "/labels", 10}), norm);
  MlpShape shape;
  shape.inputs = static_cast<int>(train_set.feature_size);
  shape.hidden = widths(o.hidden);
  shape.classes = train_set.num_classes;
  shape.dropout = o.dropout;
  OptimizerConfig opt;  // the reference recipe's AdamW with warmup-cosine (examples/fashion-mnist.toml)
  opt.lr = o.lr, opt.weight_decay = o.weight_decay, opt.clip_norm = o.clip;
  opt.schedule = Schedule::kWarmupCosine, opt.warmup_steps = static_cast<std::uint64_t>(o.steps / 10);
  const auto total = static_cast<std::uint64_t>(o.steps);

  CpuMlpStepOptions co;
  co.label_smoothing = o.label_smoothing;
  co.loss_scale = 1.0f / static_cast<float>(o.batch);
  co.dropout_seed = kernels::mix64(static_cast<std::uint64_t>(o.seed) + 0xd509);
  CpuMlpStep cpu(shape, opt, co, kernels::make_cpu_kernels(), static_cast<std::uint64_t>(o.seed), nullptr);
  CudaMlpStepOptions so;
  so.precision = precision_of(o.precision);
  so.max_rows = std::max(o.batch, o.eval_batch);
  so.label_smoothing = co.label_smoothing;
  so.loss_scale = co.loss_scale;
  so.dropout_seed = co.dropout_seed;
  so.fuse_epilogues = o.fuse;
  so.deterministic = o.deterministic;
  CudaMlpStep gpu(shape, opt, so, *cpu.host_state().params);

  BatchPrefetcher batches(train_rows, static_cast<std::uint64_t>(o.seed), static_cast<std::size_t>(o.batch), 0, 1, 0,
                          total);
  double worst = 0, worst_exact = 0;
  std::uint64_t worst_step = 0;
  const auto exact = static_cast<std::uint64_t>(std::max(o.exact_steps, 0));
  std::printf("gpu_check train: %s, MLP %d-%s-%d, dropout %g, batch %d, %d steps, fused epilogues %s\n",
              o.precision.c_str(), shape.inputs, o.hidden.c_str(), shape.classes, o.dropout, o.batch, o.steps,
              o.fuse ? "allowed" : "off");
  for (std::uint64_t s = 0; s < total; ++s) {
    const Batch b = batches.next();
    const float lr = learning_rate_at(opt, s, total);
    const StepBatch rows{b.x.data(), b.y.data(), b.rows, b.first_row};
    const double gpu_loss = drive_step(gpu, rows, lr, s) / b.rows;
    const double cpu_loss = drive_step(cpu, rows, lr, s) / b.rows;
    const double rel = std::abs(gpu_loss - cpu_loss) / std::max(std::abs(cpu_loss), 1e-12);
    if (rel > worst) worst = rel, worst_step = s;
    if (s < exact) worst_exact = std::max(worst_exact, rel);
    if (s % 20 == 0 || s + 1 == total)
      std::printf("step %4llu  cpu_loss %.6f  gpu_loss %.6f  rel %.2e\n", static_cast<unsigned long long>(s), cpu_loss,
                  gpu_loss, rel);
  }
  const auto fused = gpu.fused_layers();
  std::printf("hidden layers fused (RELU_AUX_BIAS/DRELU_BGRAD):");
  for (bool f : fused) std::printf(" %s", f ? "yes" : "no");
  std::printf("\n");
  const auto [cpu_test_loss, cpu_acc] = test_metrics(cpu, test_rows, o.eval_batch);
  const auto [gpu_test_loss, gpu_acc] = test_metrics(gpu, test_rows, o.eval_batch);
  std::printf("test: cpu loss %.5f acc %.2f%%   gpu loss %.5f acc %.2f%%\n", cpu_test_loss, 100 * cpu_acc,
              gpu_test_loss, 100 * gpu_acc);
  // The final GPU parameters' CRC-32: two --deterministic runs must print the same.
  const HostVector<float> final_params = gpu.parameters();
  std::printf("gpu_params_crc32 %08lx\n", crc32(0L, reinterpret_cast<const Bytef*>(final_params.data()),
                                                static_cast<uInt>(final_params.size() * sizeof(float))));
  const bool fp32 = o.precision == "fp32";
  const double points = 100 * std::abs(gpu_acc - cpu_acc);
  const bool pass = (!fp32 || worst_exact <= o.loss_rtol) && points <= o.acc_points;
  std::printf("verdict %s: %s: ", o.precision.c_str(), pass ? "PASS" : "FAIL");
  if (fp32)
    std::printf("first %llu steps' relative loss difference at most %.2e (bound %.0e); ",
                static_cast<unsigned long long>(std::min(exact, total)), worst_exact, o.loss_rtol);
  std::printf("accuracy difference %.2f points (bound %.2f); worst loss difference of all steps %.2e (step %llu)\n",
              points, o.acc_points, worst, static_cast<unsigned long long>(worst_step));
  return pass ? 0 : 1;
}

double seconds_of(cudaEvent_t begin, cudaEvent_t end) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  return ms / 1e3;
}

int run_bench(const BenchOptions& o) {
  const cuda::Precision precision = precision_of(o.precision);
  MlpShape shape;
  shape.inputs = o.width;
  shape.hidden.assign(static_cast<std::size_t>(o.layers - 1), o.width);
  shape.classes = o.width;
  shape.dropout = 0.0f;
  OptimizerConfig opt;  // AdamW, constant lr, no clipping: the PyTorch peer's recipe
  opt.schedule = Schedule::kConstant;
  const auto layers = mlp_layout(shape);
  std::vector<float> params(layers.back().end());
  std::mt19937 rng(7);
  for (const LayerLayout& L : layers) {
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(L.in)));
    for (std::size_t i = L.weight; i < L.bias; ++i) params[i] = normal(rng);
  }
  CudaMlpStepOptions so;
  so.precision = precision;
  so.deterministic = o.deterministic;
  so.max_rows = o.batch;
  so.loss_scale = 1.0f / static_cast<float>(o.batch);
  CudaMlpStep step(shape, opt, so, params);

  // Synthetic batch resident on the GPU (as the peer's): the step's input path is not timed.
  std::vector<float> x(static_cast<std::size_t>(o.batch) * o.width);
  std::vector<std::int32_t> y(static_cast<std::size_t>(o.batch));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % static_cast<unsigned>(o.width));
  cuda::DeviceBuffer<float> dx(x.size());
  cuda::DeviceBuffer<std::int32_t> dy(y.size());
  CUDA_CHECK(cudaMemcpy(dx.data(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy.data(), y.data(), y.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  const DeviceBatch batch{dx.data(), dy.data(), o.batch};

  cudaEvent_t begin, end;
  CUDA_CHECK(cudaEventCreate(&begin));
  CUDA_CHECK(cudaEventCreate(&end));
  for (int s = 0; s < o.warmup; ++s) step.train_step(batch, 0, 1e-4f, static_cast<std::uint64_t>(s));
  CUDA_CHECK(cudaEventRecord(begin, step.stream()));
  for (int s = 0; s < o.steps; ++s) step.train_step(batch, 0, 1e-4f, static_cast<std::uint64_t>(o.warmup + s));
  CUDA_CHECK(cudaEventRecord(end, step.stream()));
  CUDA_CHECK(cudaEventSynchronize(end));
  const StepLoss last = step.local_loss();
  const double seconds = seconds_of(begin, end);
  double sum_in_out = 0;
  for (const LayerLayout& L : layers) sum_in_out += static_cast<double>(L.in) * L.out;
  const double flops_per_step =
      6.0 * o.batch * sum_in_out - 2.0 * o.batch * static_cast<double>(layers[0].in) * layers[0].out;
  std::printf("engine precision=%s samples_per_s=%.1f tflops=%.1f step_ms=%.3f loss=%.4f fused=", o.precision.c_str(),
              o.steps * static_cast<double>(o.batch) / seconds, flops_per_step * o.steps / seconds / 1e12,
              1e3 * seconds / o.steps, last.loss_sum / o.batch);
  for (bool f : step.fused_layers()) std::printf("%s", f ? "y" : "n");
  std::printf("\n");

  // The ceiling: the same library's product of the step's shape, back to back.
  const bool half = precision == cuda::Precision::kBf16;
  const std::size_t elem = half ? 2 : 4;
  cuda::DeviceBuffer<std::uint8_t> a(static_cast<std::size_t>(o.batch) * o.width * elem),
      b(static_cast<std::size_t>(o.width) * o.width * elem), c(static_cast<std::size_t>(o.batch) * o.width * elem);
  CUDA_CHECK(cudaMemset(a.data(), 0, a.size()));
  CUDA_CHECK(cudaMemset(b.data(), 0, b.size()));
  cuda::LtMatmul lt(precision == cuda::Precision::kTf32, o.deterministic);
  cuda::MatmulArgs args{false,   true,     o.batch, o.width,  o.width, a.data(),
                        o.width, b.data(), o.width, c.data(), o.width};
  args.ab_type = args.c_type = half ? cuda::DataType::kBF16 : cuda::DataType::kF32;
  const int products = 50;
  for (int i = 0; i < 5; ++i) lt.run(args, step.stream());
  CUDA_CHECK(cudaEventRecord(begin, step.stream()));
  for (int i = 0; i < products; ++i) lt.run(args, step.stream());
  CUDA_CHECK(cudaEventRecord(end, step.stream()));
  CUDA_CHECK(cudaEventSynchronize(end));
  const double per_product = 2.0 * o.batch * static_cast<double>(o.width) * o.width;
  std::printf("ceiling precision=%s tflops=%.1f shape=%dx%dx%d\n", o.precision.c_str(),
              products * per_product / seconds_of(begin, end) / 1e12, o.batch, o.width, o.width);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return 0;
}

// The dense bf16 tensor-core peak (TFLOP/s) of the GPUs we know by name; 0 for any other.
// H100 SXM and H200 (and GH200) share the SXM5 H100's 989.4; the PCIe and NVL H100s run slower
// clocks, so they are matched before the plain "H100".
double bf16_peak_tflops(const std::string& name) {
  if (name.find("H200") != std::string::npos) return 989.4;
  if (name.find("H100") != std::string::npos) {
    if (name.find("PCIe") != std::string::npos) return 756.0;
    if (name.find("NVL") != std::string::npos) return 835.0;
    return 989.4;
  }
  if (name.find("A100") != std::string::npos) return 312.0;
  return 0;
}

// Model FLOPs per trained token, PaLM's (appendix B) as nanoGPT's estimate_mfu and llm.c count
// them: 6 N + 12 L C T. N is every parameter except wpe (nanoGPT's get_num_params): wte stays in,
// because the tied head's product with it is real work (2 V C per token forward), while wpe is a
// lookup. 12 L C T is the attention's QK^T and AV over the full T (causal masking not
// subtracted). bench/torch_gpt_gpu.py uses the same formula.
double gpt_flops_per_token(const GptConfig& g) {
  const double V = g.vocab, T = g.block, L = g.layers, C = g.embd;
  const double per_layer = 12 * C * C + 13 * C;    // c_attn, attn.c_proj, c_fc, mlp.c_proj, two LayerNorms
  const double n = V * C + L * per_layer + 2 * C;  // wte, the blocks, ln_f
  return 6 * n + 12 * L * C * T;
}

// n random tokens and their targets: one stream of n + 1, the targets shifted by one.
struct TokenBatch {
  std::vector<std::int32_t> tokens, targets;
};
TokenBatch random_tokens(std::size_t n, int vocab) {
  std::vector<std::int32_t> stream(n + 1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> token(0, vocab - 1);
  for (auto& t : stream) t = token(rng);
  return {{stream.begin(), stream.end() - 1}, {stream.begin() + 1, stream.end()}};
}

int run_gpt_against_cpu(const GptAgainstCpuOptions& o) {
  const GptConfig& g = o.model;
  const double rtol = o.loss_rtol > 0 ? o.loss_rtol : o.precision == "fp32" ? 1e-4 : 2e-2;
  OptimizerConfig adamw;  // gpu_check gpt's recipe
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 6e-4f, adamw.weight_decay = 0.1f, adamw.clip_norm = 1.0f;
  const float loss_scale = 1.0f / static_cast<float>(static_cast<double>(o.batch) * g.block);
  const std::uint64_t seed = 1337;
  CpuGptStepOptions co;
  co.loss_scale = loss_scale;
  CpuGptStep cpu(g, adamw, co, kernels::make_cpu_kernels(), seed, nullptr);
  CudaGptStepOptions so;
  so.precision = precision_of(o.precision);
  so.max_rows = o.batch;
  so.loss_scale = loss_scale;
  CudaGptStep gpu(g, adamw, so, *cpu.host_state().params);

  const std::size_t n = static_cast<std::size_t>(o.batch) * g.block;
  const auto [tokens, targets] = random_tokens(n, g.vocab);
  std::printf("gpu_check gpt-vs-cpu: %s, vocab %d, block %d, %d layers, %d heads, embd %d, batch %d, %d steps\n",
              o.precision.c_str(), g.vocab, g.block, g.layers, g.heads, g.embd, o.batch, o.steps);
  double worst = 0;
  for (int s = 0; s < o.steps; ++s) {
    const StepBatch b{nullptr, targets.data(), o.batch, static_cast<std::uint64_t>(s) * o.batch, tokens.data()};
    const double losses[2] = {drive_step(cpu, b, adamw.lr, static_cast<std::uint64_t>(s)) / static_cast<double>(n),
                              drive_step(gpu, b, adamw.lr, static_cast<std::uint64_t>(s)) / static_cast<double>(n)};
    const double rel = std::abs(losses[1] - losses[0]) / std::max(std::abs(losses[0]), 1e-12);
    worst = std::max(worst, std::isnan(rel) ? INFINITY : rel);
    std::printf("step %4d  cpu_loss %.6f  gpu_loss %.6f  rel %.2e\n", s, losses[0], losses[1], rel);
    std::fflush(stdout);
  }
  const bool pass = worst <= rtol;
  std::printf("verdict gpt %s: %s: worst relative loss difference %.2e over %d steps (bound %.0e)\n",
              o.precision.c_str(), pass ? "PASS" : "FAIL", worst, o.steps, rtol);
  return pass ? 0 : 1;
}

// The kernel table: GPU time per step by name, largest first; the first 30 names, then the rest
// together. `step_ms` (the timed steps') is what the shares are of: the GPU's idle time is the gap.
void print_kernel_times(const std::vector<KernelTime>& rows, int steps, double step_ms) {
  double busy = 0;
  for (const KernelTime& r : rows) busy += r.ns;
  const double per_step = 1e-6 / steps;  // ns in all steps -> ms per step
  std::printf("kernel_times steps=%d step_ms=%.3f gpu_busy_ms=%.3f names=%zu\n", steps, step_ms, busy * per_step,
              rows.size());
  std::printf("  %9s %7s %9s  %s\n", "ms/step", "of step", "runs/step", "kernel");
  const std::size_t shown = std::min<std::size_t>(rows.size(), 30);
  for (std::size_t i = 0; i < shown; ++i)
    std::printf("  %9.3f %6.1f%% %9.1f  %.110s\n", rows[i].ns * per_step, 100 * rows[i].ns * per_step / step_ms,
                static_cast<double>(rows[i].runs) / steps, rows[i].name.c_str());
  if (rows.size() > shown) {
    double rest = 0, runs = 0;
    for (std::size_t i = shown; i < rows.size(); ++i) rest += rows[i].ns, runs += static_cast<double>(rows[i].runs);
    std::printf("  %9.3f %6.1f%% %9.1f  (the other %zu names)\n", rest * per_step, 100 * rest * per_step / step_ms,
                runs / steps, rows.size() - shown);
  }
}

int run_gpt(const GptBenchOptions& o) {
  const GptConfig& g = o.model;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : bf16_peak_tflops(prop.name);

  HostVector<float> params;
  gpt_initialize(g, 1337, params);
  OptimizerConfig adamw;  // nanoGPT's GPT-2 124M recipe, at a constant lr
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 6e-4f, adamw.weight_decay = 0.1f, adamw.clip_norm = 1.0f;
  CudaGptStepOptions so;
  so.precision = precision_of(o.precision);
  so.deterministic = o.deterministic;
  so.max_rows = o.batch;
  so.loss_scale = 1.0f / static_cast<float>(static_cast<double>(o.batch) * g.block);
  so.flash_attention = o.flash_attention;
  CudaGptStep step(g, adamw, so, params);
  const std::size_t param_count = params.size();
  params = {};  // 0.5 GB of host memory not needed again

  // The same batch every step (host memory, as the training loop hands it over).
  const std::size_t n = static_cast<std::size_t>(o.batch) * g.block;
  const auto [tokens, targets] = random_tokens(n, g.vocab);
  auto batch_of = [&](std::uint64_t s) {
    return StepBatch{nullptr, targets.data(), o.batch, s * static_cast<std::uint64_t>(o.batch), tokens.data()};
  };

  cudaEvent_t begin, end;
  CUDA_CHECK(cudaEventCreate(&begin));
  CUDA_CHECK(cudaEventCreate(&end));
  std::vector<KernelTime> kernel_rows;
  std::uint64_t s = 0;
  for (; s < static_cast<std::uint64_t>(o.warmup); ++s) step.train_step(batch_of(s), adamw.lr, s);
  CUDA_CHECK(cudaEventRecord(begin, step.stream()));
  for (int i = 0; i < o.steps; ++i, ++s) step.train_step(batch_of(s), adamw.lr, s);
  CUDA_CHECK(cudaEventRecord(end, step.stream()));
  const StepLoss last = step.local_loss();  // waits for the queued steps
  CUDA_CHECK(cudaEventSynchronize(end));
  const double seconds = seconds_of(begin, end);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);

  std::string kernel_times_error;  // the table is an aid: its failure does not fail the benchmark
  if (o.kernel_times > 0) {
    try {
      KernelTimes recorder;
      for (int i = 0; i < o.kernel_times; ++i, ++s) step.train_step(batch_of(s), adamw.lr, s);
      step.local_loss();
      CUDA_CHECK(cudaDeviceSynchronize());
      kernel_rows = recorder.collect();
    } catch (const std::runtime_error& e) {
      kernel_times_error = e.what();
    }
  }

  const double tokens_per_s = o.steps * static_cast<double>(n) / seconds;
  const double flops_per_token = gpt_flops_per_token(g);
  const double tflops = flops_per_token * tokens_per_s / 1e12;
  const double mfu = peak > 0 ? 100 * tflops / peak : std::nan("");
  const double loss = last.loss_sum / static_cast<double>(n);
  if (peak <= 0) std::printf("note: no bf16 peak known for '%s': give --peak-tflops for an MFU\n", prop.name);
  std::printf(
      "engine_gpt attention=%s precision=%s batch=%d block=%d layers=%d embd=%d vocab=%d params=%zu tokens_per_s=%.0f "
      "step_ms=%.3f flops_per_token=%.4e tflops=%.1f peak_tflops=%.1f mfu=%.1f loss=%.4f\n",
      so.precision == cuda::Precision::kBf16 && o.flash_attention && cuda::flash_attention_supported(g.embd, g.heads)
          ? "flash"
          : "fused-fp32",
      o.precision.c_str(), o.batch, g.block, g.layers, g.embd, g.vocab, param_count, tokens_per_s,
      1e3 * seconds / o.steps, flops_per_token, tflops, peak, mfu, loss);
  if (!kernel_times_error.empty())
    std::printf("kernel_times failed: %s\n", kernel_times_error.c_str());
  else if (o.kernel_times > 0)
    print_kernel_times(kernel_rows, o.kernel_times, 1e3 * seconds / o.steps);
  if (!std::isfinite(loss)) {
    std::fprintf(stderr, "gpu_check gpt: the last step's loss is not finite\n");
    return 1;
  }
  return 0;
}

struct TelemetryOptions {
  double seconds = 30;
};

// nvidia-smi's utilisation (%) and power (W) of the GPU `uuid` now; nullopt when it cannot say.
std::optional<std::pair<double, double>> smi_reading(const std::string& uuid) {
  const std::string command =
      "nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader,nounits -i " + uuid + " 2>/dev/null";
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return std::nullopt;
  double utilization = 0, power = 0;
  const int got = std::fscanf(p, "%lf , %lf", &utilization, &power);
  ::pclose(p);
  if (got != 2) return std::nullopt;
  return std::pair{utilization, power};
}

// slurm-train's telemetry (GpuSampler, what every rank samples) against nvidia-smi on the first
// GPU given, once a second for --seconds while bf16 products keep it busy.
int run_telemetry(const TelemetryOptions& o) {
  std::string why;
  std::unique_ptr<GpuSampler> sampler = GpuSampler::open(current_environment(), &why);
  if (!sampler) throw std::runtime_error("no GPU to sample: " + (why.empty() ? "none given" : why));
  const std::string uuid = sampler->sample().front().uuid;
  std::atomic<bool> stop{false};
  std::string load_error;
  std::thread load([&] {
    try {
      CUDA_CHECK(cudaSetDevice(0));
      cudaStream_t stream = nullptr;
      CUDA_CHECK(cudaStreamCreate(&stream));
      const int n = 8192;
      cuda::DeviceBuffer<std::uint8_t> a(std::size_t{2} * n * n), b(std::size_t{2} * n * n), c(std::size_t{2} * n * n);
      CUDA_CHECK(cudaMemset(a.data(), 0, a.size()));
      CUDA_CHECK(cudaMemset(b.data(), 0, b.size()));
      cuda::LtMatmul lt(false, false);
      cuda::MatmulArgs args{false, true, n, n, n, a.data(), n, b.data(), n, c.data(), n};
      args.ab_type = args.c_type = cuda::DataType::kBF16;
      while (!stop) {
        for (int i = 0; i < 4; ++i) lt.run(args, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }
      CUDA_CHECK(cudaStreamDestroy(stream));
    } catch (const std::exception& e) {
      load_error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the clocks and power settle
  std::vector<TelemetryPair> pairs;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t > o.seconds || !load_error.empty()) break;
    const GpuSample ours = sampler->sample().front();
    const auto smi = smi_reading(uuid);
    if (smi && ours.utilization_percent && ours.power_watts && ours.energy_joules) {
      pairs.push_back({t, static_cast<double>(*ours.utilization_percent), smi->first, *ours.power_watts, smi->second,
                       *ours.energy_joules});
      std::printf("sample t=%.1f util=%.0f smi_util=%.0f power=%.1f smi_power=%.1f energy_j=%.1f\n", t,
                  pairs.back().our_utilization, smi->first, pairs.back().our_power, smi->second,
                  pairs.back().our_energy);
    }
    std::this_thread::sleep_until(start + std::chrono::duration<double>(std::floor(t) + 1));
  }
  stop = true;
  load.join();
  if (!load_error.empty()) throw std::runtime_error("the load on the GPU failed: " + load_error);
  const TelemetryAgreement a = judge_telemetry(pairs);
  std::printf(
      "telemetry gpu=%s pairs=%zu utilization_within_10=%.2f power_error=%.4f energy_error=%.4f utilization_ok=%d "
      "power_ok=%d energy_ok=%d\n",
      uuid.c_str(), pairs.size(), a.utilization_within_10, a.power_error, a.energy_error, a.utilization_ok, a.power_ok,
      a.energy_ok);
  const bool pass = a.utilization_ok && a.power_ok && a.energy_ok;
  std::printf(
      "verdict telemetry: %s: utilisation within 10 points in %.0f%% of %zu seconds (bound 90%%), power %.1f%% "
      "off (bound 5%%), energy counter %.2f%% off nvidia-smi's integrated power (bound 2%%)\n",
      pass ? "PASS" : "FAIL", 100 * a.utilization_within_10, pairs.size(), 100 * a.power_error, 100 * a.energy_error);
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpu_check: the GPU training step against the CPU path, and its speed"};
  app.require_subcommand(1);
  TrainOptions t;
  CLI::App* train = app.add_subcommand("train", "the same training on the CPU and the GPU, step by step");
  train->add_option("--data", t.data, "folder with train.h5 and test.h5 (slurm-train data import)")->required();
  train->add_option("--precision", t.precision, "fp32, tf32 or bf16");
  train->add_option("--steps", t.steps);
  train->add_option("--batch", t.batch);
  train->add_option("--hidden", t.hidden, "hidden widths, e.g. 1024,512");
  train->add_option("--dropout", t.dropout);
  train->add_option("--label-smoothing", t.label_smoothing);
  train->add_option("--clip", t.clip);
  train->add_option("--lr", t.lr);
  train->add_option("--seed", t.seed);
  train->add_option("--loss-rtol", t.loss_rtol, "fp32: bound on the relative loss difference of the first steps");
  train->add_option("--exact-steps", t.exact_steps, "fp32: how many first steps --loss-rtol bounds");
  train->add_option("--acc-points", t.acc_points, "bound on the test accuracy difference (points)");
  train->add_flag("!--no-fuse", t.fuse, "bias and activations by the element-wise kernels only");
  train->add_flag("--deterministic", t.deterministic, "cuBLASLt algorithms without split-K reductions");
  BenchOptions b;
  CLI::App* bench = app.add_subcommand("bench", "a GEMM-bound MLP's training step and the matmul ceiling");
  bench->add_option("--precision", b.precision, "fp32, tf32 or bf16");
  bench->add_option("--width", b.width);
  bench->add_option("--layers", b.layers);
  bench->add_option("--batch", b.batch);
  bench->add_option("--steps", b.steps);
  bench->add_option("--warmup", b.warmup);
  bench->add_flag("--deterministic", b.deterministic);
  GptBenchOptions gb;
  CLI::App* gpt = app.add_subcommand("gpt", "GPT-2 124M's training step (CudaGptStep): tokens/s and MFU");
  gpt->add_option("--precision", gb.precision, "fp32, tf32 or bf16");
  gpt->add_option("--batch", gb.batch, "windows of --block tokens per step")->check(CLI::PositiveNumber);
  gpt->add_option("--steps", gb.steps, "timed steps")->check(CLI::PositiveNumber);
  gpt->add_option("--warmup", gb.warmup, "untimed steps first");
  gpt->add_option("--block", gb.model.block);
  gpt->add_option("--layers", gb.model.layers);
  gpt->add_option("--heads", gb.model.heads);
  gpt->add_option("--embd", gb.model.embd);
  gpt->add_option("--vocab", gb.model.vocab);
  gpt->add_option("--peak-tflops", gb.peak_tflops,
                  "the GPU's dense bf16 peak for the MFU (default: by its name; H100 SXM/H200 989.4)");
  gpt->add_flag("--deterministic", gb.deterministic, "cuBLASLt algorithms without split-K reductions");
  gpt->add_option("--kernel-times", gb.kernel_times,
                  "then N more steps recorded through CUPTI: GPU time per step by kernel")
      ->check(CLI::NonNegativeNumber);
  gpt->add_flag("!--no-flash-attention", gb.flash_attention,
                "bf16: the fp32 fused attention kernels instead of the tensor-core ones");
  GptAgainstCpuOptions gc;
  CLI::App* gpt_cpu = app.add_subcommand("gpt-vs-cpu", "the GPT's GPU step against its CPU step, at full size");
  gpt_cpu->add_option("--precision", gc.precision, "fp32, tf32 or bf16");
  gpt_cpu->add_option("--batch", gc.batch, "windows of --block tokens per step")->check(CLI::PositiveNumber);
  gpt_cpu->add_option("--steps", gc.steps)->check(CLI::PositiveNumber);
  gpt_cpu->add_option("--block", gc.model.block);
  gpt_cpu->add_option("--layers", gc.model.layers);
  gpt_cpu->add_option("--heads", gc.model.heads);
  gpt_cpu->add_option("--embd", gc.model.embd);
  gpt_cpu->add_option("--vocab", gc.model.vocab);
  gpt_cpu->add_option("--loss-rtol", gc.loss_rtol,
                      "bound on every step's relative loss difference (default: 1e-4 "
                      "in fp32, 2e-2 otherwise)");
  TelemetryOptions tel;
  CLI::App* telemetry = app.add_subcommand("telemetry", "slurm-train's GPU telemetry against nvidia-smi on a busy GPU");
  telemetry->add_option("--seconds", tel.seconds, "how long to compare, once a second")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    openblas_set_num_threads(std::max(1u, std::thread::hardware_concurrency()));
    if (gpt->parsed()) return run_gpt(gb);
    if (gpt_cpu->parsed()) return run_gpt_against_cpu(gc);
    if (telemetry->parsed()) return run_telemetry(tel);
    return train->parsed() ? run_train(t) : run_bench(b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_check: error: %s\n", e.what());
    return 1;
  }
}

#else  // no CUDA in this build

int main() {
  std::fprintf(stderr, "gpu_check: this build has no CUDA support (nvcc was not found when it was built)\n");
  return 2;
}

#endif
