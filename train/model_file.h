// The trained model as an HDF5 file any tool reads: /model/<layerN.weight|bias> float32
// datasets ([out, in] and [out]), and /meta attributes with the configuration and program
// version. Written by rank 0 through a temporary file and a rename.
#pragma once

#include <string>
#include <vector>

#include "train/mlp.h"

namespace slurm_train {

void save_model(const std::string& path, const std::vector<LayerLayout>& layers, const std::vector<float>& params,
                const std::string& config_toml);

}  // namespace slurm_train
