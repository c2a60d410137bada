// Resuming on every rank from one checkpoint: rank 0 chooses the newest valid checkpoint of the
// folder (falling back past bad ones with a warning), checks that it fits this run, and
// broadcasts its state; so all ranks agree on the file, only one reads shared storage, and a
// checkpoint written by any world size resumes on any other (the data position is global).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_state.h"
#include "train/comm/comm.h"

namespace slurm_train {

// What the resumed run must match; the buffers receive the checkpoint's state. Rank 0 reads the
// checkpoint straight into them (no fresh memory to zero and fault in first), so they must hold
// a fresh run's state on entry, params = initialize_model_parameters(model, seed) and zero optimizer
// state: a resume that finds no usable checkpoint puts exactly that back after the failed reads.
struct ResumeTarget {
  ModelLayout model;
  std::string optimizer;  // "adamw" | "sgd"
  std::uint64_t global_batch = 0, seed = 0, total_steps = 0;
  HostVector<float>* params = nullptr;
  HostVector<float>* first = nullptr;
  HostVector<float>* second = nullptr;  // may be empty (SGD)
  std::uint64_t steps_per_epoch = 0;    // global batches of an epoch
};

// Why a checkpoint cannot continue this run, or "" when it can. Pure: unit-tested.
std::string checkpoint_mismatch(const CheckpointState& checkpoint, const ResumeTarget& target);

struct Resumed {
  CheckpointCounters counters;
  std::string path;    // on rank 0; "" elsewhere
  std::string device;  // where the run that wrote it computed (/meta device), on rank 0
};

// Collective. nullopt when the folder holds no valid checkpoint (a fresh start). A checkpoint
// that does not fit the run throws CheckpointError on every rank. `warn` gets rank 0's
// warnings (bad files skipped, a schedule length that changed).
std::optional<Resumed> resume_from_checkpoint(const std::string& dir, const ResumeTarget& target, Comm& comm,
                                              const std::function<void(const std::string&)>& warn);

}  // namespace slurm_train
