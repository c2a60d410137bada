// What a model is, as checkpoints, model files and resumes see it: its kind, its parameter
// tensors (names, shapes, places in the packed buffer) and the optimizer's view of them (which
// ranges decay). The MLP's tensors follow from its layers; the GPT's from its configuration.
// Pure: no file, no device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/models/gpt.h"
#include "train/models/mlp.h"
#include "train/models/param_tensor.h"

namespace slurm_train {

struct ModelLayout {
  std::string kind = "mlp";          // "mlp" | "gpt"
  std::vector<LayerLayout> layers;   // mlp: its layers; gpt: one per tensor, matrices decaying
  std::vector<ParamTensor> tensors;  // in buffer order
  GptConfig gpt;                     // kind "gpt" only

  std::size_t parameters() const { return tensors.empty() ? 0 : tensors.back().offset + tensors.back().size; }
};

ModelLayout mlp_model_layout(const std::vector<LayerLayout>& layers);
ModelLayout gpt_model_layout(const GptConfig& config);

// Why a model read from a file is not a run's, or "" when it is the same.
std::string model_layout_mismatch(const ModelLayout& file, const ModelLayout& run);

// A fresh run's parameters for `seed`: the MLP's He initialisation or GPT-2's.
void initialize_model_parameters(const ModelLayout& model, std::uint64_t seed, HostVector<float>& params);

}  // namespace slurm_train
