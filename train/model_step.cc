#include "train/model_step.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/kernels.h"
#include "train/cpu_gpt_step.h"
#include "train/cpu_mlp_step.h"
#include "train/device.h"
#include "train/mlp.h"

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
  openblas_set_num_threads(blas_threads_for_rank(tc.threads, comm.local_size()));
  auto kernels = tc.kernels == "reference" ? kernels::make_reference_kernels<float>() : kernels::make_cpu_kernels();
  if (config.model.kind == "gpt") {
    GptStepOptions o;
    o.loss_scale = 1.0f / static_cast<float>(static_cast<double>(tc.global_batch) * config.model.block);
    o.bucket_mb = tc.bucket_mb;
    o.dropout = static_cast<float>(config.model.dropout);
    o.dropout_seed = kernels::mix64(static_cast<std::uint64_t>(tc.seed) + 0xd509);
    o.eval_rows = static_cast<int>(std::max<std::int64_t>(1, (tc.global_batch + comm.size() - 1) / comm.size()));
    ChosenStep chosen;
    chosen.step = std::make_unique<CpuGptStep>(gpt_config_of(config.model, inputs), optimizer_config_of(tc), o,
                                               std::move(kernels), static_cast<std::uint64_t>(tc.seed), &comm);
    if (tc.device == "auto" && probe_cuda().devices > 0)
      chosen.device_note = "train.device = auto: the gpt model trains on the CPU (its GPU step is not there yet)";
    return chosen;
  }
  const DeviceChoice device = choose_device(tc.device, tc.device == "cpu" ? CudaProbe{} : probe_cuda());
  StepOptions o;
  o.label_smoothing = static_cast<float>(tc.label_smoothing);
  o.loss_scale = 1.0f / static_cast<float>(tc.global_batch);  // the loss is a mean over the global batch
  o.dropout_seed = kernels::mix64(static_cast<std::uint64_t>(tc.seed) + 0xd509);
  o.bucket_mb = tc.bucket_mb;
  ChosenStep chosen;
  chosen.step = std::make_unique<CpuMlpStep>(shape_of(config, inputs), optimizer_config_of(tc), o, std::move(kernels),
                                             static_cast<std::uint64_t>(tc.seed), &comm);
  chosen.device_note = device.note;
  return chosen;
}

}  // namespace slurm_train
