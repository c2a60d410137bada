#include "train/steps/model_step.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>

#include "kernels/kernels.h"
#include "train/models/mlp.h"
#include "train/steps/cpu_gpt_step.h"
#include "train/steps/cpu_mlp_step.h"
#include "train/steps/device.h"

#if defined(SLURM_TRAIN_WITH_CUDA)
#include "kernels/cuda/cuda_check.h"
#include "train/comm/comm_nccl.h"
#include "train/steps/cuda_gpt_step.h"
#include "train/steps/cuda_mlp_step.h"
#endif

namespace slurm_train {

namespace {

MlpShape shape_of(const RunConfig& c, std::size_t inputs) {
  MlpShape s;
  s.inputs = static_cast<int>(inputs);
  s.hidden = c.model.hidden;
  s.classes = c.data.num_classes;
  s.activation = c.model.activation == "gelu" ? kernels::Activation::kGelu : kernels::Activation::kRelu;
  s.dropout = static_cast<float>(c.model.dropout);
  return s;
}

std::uint64_t dropout_seed_of(const TrainConfig& tc) {
  return kernels::mix64(static_cast<std::uint64_t>(tc.seed) + 0xd509);
}

CpuMlpStepOptions mlp_step_options(const TrainConfig& tc) {
  CpuMlpStepOptions o;
  o.label_smoothing = static_cast<float>(tc.label_smoothing);
  o.loss_scale = 1.0f / static_cast<float>(tc.global_batch);  // the loss is a mean over the global batch
  o.dropout_seed = dropout_seed_of(tc);
  o.bucket_mb = tc.bucket_mb;
  return o;
}

// How much of the optimizer state rank 0 keeps, against the whole state.
void add_sharding_note(ChosenStep& chosen, int ranks, std::size_t state_bytes, const TrainStep& step,
                       const TrainConfig& tc) {
  const double mib = 1.0 / (1 << 20);
  const std::size_t whole = step.model_layout().parameters() * sizeof(float) * (tc.optimizer == "adamw" ? 2 : 1);
  chosen.device_note += fmt::format(
      "{}train.shard_optimizer: the optimizer state is sharded over {} ranks: {:.2f} "
      "MiB on rank 0 ({:.2f} MiB whole)",
      chosen.device_note.empty() ? "" : "\n", ranks, state_bytes * mib, whole * mib);
}

#if defined(SLURM_TRAIN_WITH_CUDA)
cuda::Precision precision_of(const std::string& p) {
  return p == "bf16" ? cuda::Precision::kBf16 : p == "tf32" ? cuda::Precision::kTf32 : cuda::Precision::kFp32;
}
#endif

// The model on this rank's GPU, from the same initial parameters, masks and loss scale as the CPU
// step; its gradient buckets summed by NCCL on their own stream while backward goes on.
void make_cuda_step(const RunConfig& config, std::size_t inputs, const DevicePlan& plan, Comm& comm,
                    ChosenStep& chosen) {
#if defined(SLURM_TRAIN_WITH_CUDA)
  const TrainConfig& tc = config.train;
  CUDA_CHECK(cudaSetDevice(plan.gpu));
  // A rank's share of the global batch (shares differ by at most one row).
  const std::int64_t share = (tc.global_batch + comm.size() - 1) / comm.size();
  if (config.model.kind == "gpt") {
    const GptConfig g = gpt_config_of(config.model, inputs);
    HostVector<float> initial;
    gpt_initialize(g, static_cast<std::uint64_t>(tc.seed), initial);
    CudaGptStepOptions o;
    o.precision = precision_of(plan.precision);
    o.deterministic = tc.deterministic;
    o.max_rows = static_cast<int>(share);  // evaluation runs in slices of as many windows
    o.loss_scale = 1.0f / static_cast<float>(static_cast<double>(tc.global_batch) * config.model.block);
    o.dropout = static_cast<float>(config.model.dropout);
    o.dropout_seed = dropout_seed_of(tc);
    o.bucket_mb = tc.bucket_mb;
    auto step = std::make_unique<CudaGptStep>(g, optimizer_config_of(tc), o, initial);
    chosen.device_comm = make_nccl_comm(comm, {plan.gpu, step->stream(), std::chrono::seconds(600)});
    const bool shard = tc.shard_optimizer && comm.size() > 1;
    step->reduce_gradients_with(*chosen.device_comm, shard);
    if (shard) add_sharding_note(chosen, comm.size(), step->optimizer_state_bytes(), *step, tc);
    chosen.step = std::move(step);
    return;
  }
  const MlpShape shape = shape_of(config, inputs);
  auto reference = kernels::make_reference_kernels<float>();
  Mlp<float> initial(shape, *reference);
  initial.initialize(static_cast<std::uint64_t>(tc.seed));
  const CpuMlpStepOptions so = mlp_step_options(tc);
  CudaMlpStepOptions o;
  o.precision = precision_of(plan.precision);
  o.deterministic = tc.deterministic;
  // The largest batch a step or an evaluation hands it: a rank's share or an evaluation batch.
  o.max_rows = static_cast<int>(std::max(share, tc.eval_batch));
  o.label_smoothing = so.label_smoothing;
  o.loss_scale = so.loss_scale;
  o.dropout_seed = so.dropout_seed;
  o.bucket_mb = so.bucket_mb;
  auto step = std::make_unique<CudaMlpStep>(shape, optimizer_config_of(tc), o, initial.params());
  chosen.device_comm = make_nccl_comm(comm, {plan.gpu, step->stream(), std::chrono::seconds(600)});
  step->reduce_gradients_with(*chosen.device_comm);
  chosen.step = std::move(step);
#else
  (void)config, (void)inputs, (void)plan, (void)comm, (void)chosen;
  throw ConfigError("train.device = cuda: this build has no CUDA support (nvcc was not found when it was built)");
#endif
}

}  // namespace

ModelRecipe model_recipe(const RunConfig& config, Normalization norm, bool uint8_features) {
  return model_recipe_of(norm, uint8_features, config.model.activation);
}

OptimizerConfig optimizer_config_of(const TrainConfig& t) {
  OptimizerConfig o;
  o.kind = t.optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdamW;
  o.lr = static_cast<float>(t.lr);
  o.momentum = static_cast<float>(t.momentum);
  o.nesterov = t.nesterov;
  o.beta1 = static_cast<float>(t.beta1);
  o.beta2 = static_cast<float>(t.beta2);
  o.eps = static_cast<float>(t.eps);
  o.weight_decay = static_cast<float>(t.weight_decay);
  o.schedule = t.schedule == "constant" ? Schedule::kConstant : Schedule::kWarmupCosine;
  o.warmup_steps = static_cast<std::uint64_t>(t.warmup_steps);
  o.min_lr_ratio = static_cast<float>(t.min_lr_ratio);
  o.clip_norm = static_cast<float>(t.clip_norm);
  return o;
}

GptConfig gpt_config_of(const ModelConfig& m, std::size_t vocab) {
  return {static_cast<int>(vocab), m.block, m.layers, m.heads, m.embd};
}

ChosenStep make_train_step(const RunConfig& config, std::size_t inputs, Comm& comm) {
  const TrainConfig& tc = config.train;
  const DevicePlan plan = plan_device(tc.device, tc.precision, tc.gpu, tc.device == "cpu" ? CudaProbe{} : probe_cuda(),
                                      comm.local_rank(), comm.local_size());
  ChosenStep chosen;
  chosen.device = plan.name;
  chosen.device_note = plan.note;
  if (plan.kind == DeviceKind::kCuda) {
    if (tc.shard_optimizer && config.model.kind != "gpt")
      throw ConfigError(
          fmt::format("train.shard_optimizer = true: on a GPU the optimizer is sharded for model.kind = "
                      "\"gpt\" only so far, and this run trains an MLP on {}; set "
                      "train.shard_optimizer = false or train.device = cpu",
                      plan.name));
    make_cuda_step(config, inputs, plan, comm, chosen);
    return chosen;
  }
  openblas_set_num_threads(blas_threads_for_rank(tc.threads, comm.local_size()));
  auto kernels = tc.kernels == "reference" ? kernels::make_reference_kernels<float>() : kernels::make_cpu_kernels();
  const bool shard = tc.shard_optimizer && comm.size() > 1;
  std::unique_ptr<TrainStep> step;
  std::size_t state_bytes = 0;
  if (config.model.kind == "gpt") {
    CpuGptStepOptions o;
    o.loss_scale = 1.0f / static_cast<float>(static_cast<double>(tc.global_batch) * config.model.block);
    o.bucket_mb = tc.bucket_mb;
    o.dropout = static_cast<float>(config.model.dropout);
    o.dropout_seed = dropout_seed_of(tc);
    o.eval_rows = static_cast<int>(std::max<std::int64_t>(1, (tc.global_batch + comm.size() - 1) / comm.size()));
    o.shard_optimizer = shard;
    auto gpt = std::make_unique<CpuGptStep>(gpt_config_of(config.model, inputs), optimizer_config_of(tc), o,
                                            std::move(kernels), static_cast<std::uint64_t>(tc.seed), &comm);
    state_bytes = gpt->optimizer_state_bytes();
    step = std::move(gpt);
  } else {
    CpuMlpStepOptions o = mlp_step_options(tc);
    o.shard_optimizer = shard;
    auto mlp = std::make_unique<CpuMlpStep>(shape_of(config, inputs), optimizer_config_of(tc), o, std::move(kernels),
                                            static_cast<std::uint64_t>(tc.seed), &comm);
    state_bytes = mlp->optimizer_state_bytes();
    step = std::move(mlp);
  }
  if (shard) add_sharding_note(chosen, comm.size(), state_bytes, *step, tc);
  chosen.step = std::move(step);
  return chosen;
}

}  // namespace slurm_train
