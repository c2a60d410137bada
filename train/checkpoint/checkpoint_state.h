// Everything a checkpoint holds, in host memory: what the training loop copies out (fast) before
// a background thread writes it, and what a resume reads back. Nothing here touches a file.
//
// Randomness in the engine is counter-based: a dropout mask is a function of (seed, global row,
// unit) and an epoch's shuffle of (seed, epoch). No rank holds mutable RNG state, so the seed and
// the global step ARE the RNG state of every rank; the file says so (/train/rng attribute)
// rather than storing per-rank generator states that do not exist. There is no mixed precision,
// hence no loss scale either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint/best_checkpoint.h"
#include "train/io/host_vector.h"
#include "train/models/model_file.h"
#include "train/models/model_layout.h"

namespace slurm_train {

// Bumped whenever the layout changes in a way an older reader would misread.
inline constexpr std::int64_t kCheckpointFormatVersion = 1;

// The scalars of /train and /optimizer; trivially copyable so that rank 0 can broadcast them.
struct CheckpointCounters {
  std::uint64_t step = 0;            // steps done == the global step the resumed run starts at
  std::uint64_t epoch = 0;           // epoch of that step
  std::uint64_t batch_in_epoch = 0;  // its global batch within the epoch (the data position)
  std::uint64_t samples_seen = 0;    // step * global_batch
  std::uint64_t seed = 0;            // seed of initialisation, shuffles and dropout
  std::uint64_t global_batch = 0;
  std::uint64_t schedule_total_steps = 0;  // the learning-rate schedule's length
  double next_lr = 0;                      // the schedule's rate for `step` (for people reading the file)
  double epoch_loss_sum = 0;               // sum of this epoch's step losses so far (the epoch line)
  double epoch_seconds = 0;                // and their time
  std::uint64_t optimizer_steps = 0;       // updates applied (AdamW's bias correction counts them)
  std::int64_t world_size = 0;             // of the run that wrote the checkpoint
};

struct CheckpointState {
  CheckpointCounters counters;
  std::string optimizer;                       // "adamw" or "sgd"
  ModelLayout model;                           // the parameters' names and places in the buffers below
  HostVector<float> params;                    // /model/<tensor name>
  HostVector<float> first, second;             // AdamW exp_avg, exp_avg_sq; SGD momentum_buffer, (empty)
  ModelRecipe recipe;                          // /model widths and activation, /preprocessing (model_file.h)
  std::string config_toml;                     // /meta config
  std::string program_version, created, host;  // /meta; created: ISO 8601 UTC
  // /meta device: where the run computed, "cpu" or "cuda:0 (NVIDIA H200, bf16)"; "" in files
  // written before it was recorded. The state itself is the same on any device.
  std::string device;
  std::int64_t format_version = kCheckpointFormatVersion;
  // The description of a checkpoint that the ranks write together (checkpoint_parallel.h): the
  // tensors are not here but where each rank keeps its shard of them.
  bool is_shard = false;
  std::string path;  // the file it was read from; not written
  // Set when this checkpoint is the best so far (ckpt.keep_best): the folder's best marker is
  // committed after it (checkpoint_store.h). Not in the file.
  std::optional<BestRecord> best;
};

// /optimizer/<state> group names: PyTorch's names, so that people know them.
inline std::vector<std::string> optimizer_state_names(const std::string& optimizer) {
  if (optimizer == "adamw") return {"exp_avg", "exp_avg_sq"};
  return {"momentum_buffer"};
}

}  // namespace slurm_train
