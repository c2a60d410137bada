// The trained model as an HDF5 file any tool reads: /model/<tensor> float32 datasets (the MLP's
// layerN.weight [out, in] and layerN.bias [out]; the GPT's GPT-2 names and shapes, train/models/gpt.h),
// (each with the checkpoints' crc32 attribute, checkpoint_file.h) and /meta attributes with the
// configuration and program version. Written by rank 0 through a temporary file and a rename.
//
// The file (and every checkpoint) also carries what running the model needs besides its
// weights, so that it is usable without the training set or this program:
//   /model attributes        widths (int64 [inputs, hidden..., classes]), activation (of the
//                            hidden layers: "relu", "gelu" in its exact erf form, "identity")
//   /preprocessing attributes input_scale, mean, inv_stddev (float64) and formula (text):
//                            x = (raw * input_scale - mean) * inv_stddev, raw being the stored
//                            feature (a uint8 pixel or a float) of the sample flattened in C order
// The README's PyTorch recipe (examples/load_in_pytorch.py) reads exactly these.
#pragma once

#include <hdf5.h>

#include <span>
#include <string>
#include <vector>

#include "train/data/dataset.h"
#include "train/models/model_layout.h"

namespace slurm_train {

struct ModelRecipe {
  std::string activation = "relu";
  double input_scale = 1.0;             // the float32 factor the engine applies: 1/255 for uint8 features
  double mean = 0.0, inv_stddev = 1.0;  // the training set's, as float32 values (Normalization)
};

// The recipe of a run: its training set's normalisation and feature type, its activation.
ModelRecipe model_recipe_of(Normalization norm, bool uint8_features, const std::string& activation);

// Writes the /model attributes into `file` (kind, and the MLP's widths and activation or the GPT's
// shape under GPT-2's names: vocab_size, n_positions, n_layer, n_head, n_embd) and, for an MLP,
// the /preprocessing group; `context` names the file.
void write_model_recipe(hid_t file, const ModelLayout& model, const ModelRecipe& recipe, const std::string& context);

void save_model(const std::string& path, const ModelLayout& model, std::span<const float> params,
                const std::string& config_toml, const ModelRecipe& recipe);

}  // namespace slurm_train
