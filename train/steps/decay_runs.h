// The packed parameters as runs of adjacent tensors that all take weight decay (matrices) or all
// do not (vectors, as gpt_decay_layout decides): a fused optimizer pass takes few decay-free
// ranges, and the GPT has two vectors per LayerNorm and one per bias, so its GPU step launches
// the update once per run. A sharded optimizer updates the runs' parts within its shard. Pure.
#pragma once

#include <cstddef>
#include <vector>

#include "train/models/param_tensor.h"

namespace slurm_train {

struct DecayRun {
  std::size_t begin = 0, end = 0;  // packed elements [begin, end)
  bool decay = false;
  bool operator==(const DecayRun&) const = default;
};

// The tensors in layout order (each tensor's offset follows the one before), merged into runs.
std::vector<DecayRun> decay_runs(const std::vector<ParamTensor>& tensors);

// The parts of `runs` within [begin, end), in order; runs that miss it are left out.
std::vector<DecayRun> runs_within(const std::vector<DecayRun>& runs, std::size_t begin, std::size_t end);

}  // namespace slurm_train
