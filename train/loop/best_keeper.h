// ckpt.keep_best in the training loop: the best evaluation so far (a resumed run's from the
// folder's best marker), and whether this step's evaluation beats it, in which case the step
// boundary saves a checkpoint that the marker then names (checkpoint_store.h).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "train/checkpoint/best_checkpoint.h"
#include "train/comm/comm.h"

namespace slurm_train {

class BestKeeper {
 public:
  // Collective when `keep_best` is set: rank 0 reads DIR/best and every rank gets its reading,
  // so that all of them decide alike. An empty `keep_best` keeps nothing and is not collective.
  BestKeeper(const std::string& keep_best, const std::string& dir, Comm& comm, bool rank0, std::ostream& out);

  // After the evaluation at `steps_done` (its figures are the same on every rank).
  void evaluated(std::uint64_t steps_done, const EvaluationFigures& figures);
  // The record to commit with the checkpoint of `steps_done` when its evaluation was a new best;
  // nullopt otherwise. Taken once.
  std::optional<BestRecord> take(std::uint64_t steps_done);

 private:
  std::optional<BestMetric> metric_;
  std::optional<BestRecord> best_, due_;
  bool rank0_;
  std::ostream& out_;
};

}  // namespace slurm_train
