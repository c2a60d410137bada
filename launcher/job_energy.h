// The GPU energy of an `exec` job: each rank's supervisor reads its GPUs' energy counters at its
// program's first reported step and again when the program exits, and sends the difference with
// its last word to rank 0 (watchdog.h), which gives the job's joules per step and per token or
// sample. `run` has the same figures from its training loop (trainer.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "train/loop/metrics.h"

namespace slurm_train {

// One rank's part: whether it was given a GPU, the joules its GPUs used (nullopt: a GPU without
// an energy counter, or no step reported) and the steps its program reported meanwhile.
struct RankEnergy {
  int rank = 0;
  bool has_gpu = false;
  std::optional<double> joules;
  std::uint64_t steps = 0;
};

// The job's energy over rank 0's `steps` (its program's steps from its first report to its
// exit). Each rank's joules per step are its own joules over its own steps, so that ranks whose
// windows differ by when each started and exited still add up per step; the job's joules per
// step are their sum, and its joules the sum of the ranks'. `units_per_step` (0: none) are the
// tokens or samples of one step of the whole job, named by `unit`. Nullopt when no rank has a
// GPU, a rank with one has no count, or one reported no steps (a sum without it would look
// complete and be low).
std::optional<RunEnergy> job_energy(std::span<const RankEnergy> ranks, std::uint64_t steps, double units_per_step,
                                    const std::string& unit);

}  // namespace slurm_train
