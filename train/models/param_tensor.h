// One named parameter tensor of a model whose parameters are packed into one buffer: its name as
// checkpoints and model files store it, its shape, and where it lies in the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slurm_train {

struct ParamTensor {
  std::string name;                  // "layer1.weight", "h.0.attn.c_attn.weight"
  std::vector<std::int64_t> shape;   // C order
  std::size_t offset = 0, size = 0;  // in floats
};

}  // namespace slurm_train
