// The training step a run's configuration asks for: the model ([model]: the MLP or the GPT), the optimizer
// ([train]) and the device (train.device; on the CPU, the BLAS threads and the kernels). The one
// place that knows which TrainStep implementations exist.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "train/comm/comm.h"
#include "train/config/config.h"
#include "train/data/dataset.h"
#include "train/models/gpt.h"
#include "train/models/model_file.h"
#include "train/steps/optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

struct ChosenStep {
  // The GPU's gradient reductions (NCCL), declared first so that the step that uses it goes first.
  std::unique_ptr<Comm> device_comm;
  std::unique_ptr<TrainStep> step;
  std::string device;       // "cpu", "cuda:0 (NVIDIA H200, bf16)"
  std::string device_note;  // lines for the log when the device choice needs saying, or ""
};

// A step for samples of `inputs` features (gpt: a vocabulary of `inputs` tokens), its gradients
// summed over `comm`'s ranks, its parameters initialised from train.seed; on the GPU
// (train/steps/device.h) one per rank, its gradients summed by NCCL (bootstrapped over `comm`). Throws
// ConfigError for train.device = cuda where the run cannot use a GPU.
ChosenStep make_train_step(const RunConfig& config, std::size_t inputs, Comm& comm);

// [model]'s GPT shape for a vocabulary of `vocab` tokens.
GptConfig gpt_config_of(const ModelConfig& model, std::size_t vocab);

// What the saved model records besides its parameters: the training data's normalisation and
// feature type, and what running the model again needs ([model]'s activation).
ModelRecipe model_recipe(const RunConfig& config, Normalization norm, bool uint8_features);

// [train]'s optimizer, learning-rate schedule and clipping.
OptimizerConfig optimizer_config_of(const TrainConfig& t);

}  // namespace slurm_train
