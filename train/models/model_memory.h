// What training a model needs in memory, from the configuration alone: the check a run makes
// before it allocates anything, so that model.hidden = [65536, 65536] ends in a clear error.
// A lower bound: it counts the big buffers, not the allocator's slack.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace slurm_train {

struct ModelMemory {
  std::uint64_t parameters = 0;
  std::optional<std::uint64_t> bytes;  // nullopt: beyond 64 bits
  std::string why;                     // how `bytes` is made up, for messages
};

// Parameters of the MLP inputs -> hidden... -> classes; nullopt on overflow.
std::optional<std::uint64_t> mlp_parameter_count(std::uint64_t inputs, const std::vector<int>& hidden, int classes);

// Parameters of the GPT of [model] for a vocabulary of `vocab` tokens (model.layers, embd, block).
std::optional<std::uint64_t> gpt_parameter_count(std::uint64_t vocab, const ModelConfig& model);

// Float32 weights, gradients and optimizer moments (and their snapshot when checkpoints are
// written asynchronously), plus the activations of the larger of a rank's batch and an
// evaluation batch. `inputs`: the MLP's features per sample, or the GPT's vocabulary.
ModelMemory model_training_memory(const RunConfig& config, std::uint64_t inputs, std::uint64_t ranks);

}  // namespace slurm_train
