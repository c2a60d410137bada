// The training loop's checkpoints, in one object: when one is due, the counters a resume
// continues from, the write on rank 0 (on a background thread with ckpt.async), and the stall a
// save costs the loop, logged once the copy is taken. Rank 0 holds the replicated state and
// writes it; on the other ranks every call but due() returns at once. With sharded state
// (CheckpointPlan::together) every rank writes its shard in save(), together.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "train/checkpoint/checkpoint_store.h"
#include "train/checkpoint/checkpoint_writer.h"
#include "train/comm/comm.h"
#include "train/config/config.h"
#include "train/models/model_file.h"
#include "train/steps/optimizer.h"
#include "train/steps/train_step.h"

namespace slurm_train {

// What every checkpoint of a run shares.
struct CheckpointPlan {
  CkptConfig ckpt;
  std::string optimizer;     // train.optimizer, as the file names it
  OptimizerConfig schedule;  // the next step's learning rate, for people reading the file
  std::uint64_t seed = 0, global_batch = 0, steps_per_epoch = 0, total_steps = 0;
  int world_size = 0;
  std::string config_toml;
  ModelRecipe recipe;
  unsigned slow_ms = 0;  // --inject-fault slow-ckpt@MS (checkpoint_file.h)
  std::string device;    // where the run computes (/meta device)
  // Set when the optimizer state is sharded over several ranks: every rank writes its shard of
  // each checkpoint into the one file, together and in the loop (checkpoint_parallel.h;
  // ckpt.async concerns rank 0's serial write of a replicated run).
  Comm* together = nullptr;
};

class Checkpointing {
 public:
  Checkpointing(CheckpointPlan plan, TrainStep& step, bool writer, std::ostream& out);

  // Whether the boundary after `done` steps saves: every ckpt.every steps, at the last step, and
  // when the run stops early. Never without ckpt.dir.
  bool due(std::uint64_t done, bool stopping) const;
  // Submits the step's host state (TrainStep::state_to_host first) after `done` steps, with the
  // epoch's running sums (the epoch line resumes from them); with `best`, the folder's best
  // marker names it once it is committed.
  void save(std::uint64_t done, double epoch_loss, double epoch_seconds,
            const std::optional<BestRecord>& best = std::nullopt);
  // Before the parameters next change: waits until the saved copy is taken; logs the stall.
  void wait_copied();
  // Whether the ranks write each checkpoint together (and the step's state is not gathered).
  bool together() const { return plan_.together != nullptr; }
  // A failed background write ends the run now, naming the path.
  void check();
  // At the end: waits for the write in flight; its error fails the run.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  const CheckpointPlan plan_;
  TrainStep& step_;
  const bool writer_;
  std::ostream& out_;
  const std::string host_;
  std::optional<TrustedFolder> folder_;  // ckpt.dir, where this rank writes
  CheckpointState shard_meta_;           // what a checkpoint written together says besides the tensors
  void save_together(const CheckpointCounters& c, Clock::time_point begin, const std::optional<BestRecord>& best);
  struct Pending {
    bool active = false;
    std::uint64_t step = 0;
    double waited = 0;  // for the previous write, in submit()
  } pending_;
  // Last: its thread reads the members above until its destructor has joined.
  CheckpointWriter writer_thread_;
};

}  // namespace slurm_train
