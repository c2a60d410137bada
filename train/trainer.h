// The training loop: data-parallel training of the MLP on every rank, with the global batch
// split over ranks, gradients all-reduced in buckets during backward, and an evaluation on the
// test set (sharded over ranks) after each epoch. Rank 0 prints one line per epoch.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "train/comm.h"
#include "train/config.h"

namespace slurm_train {

struct EpochResult {
  std::uint64_t epoch = 0, step = 0;  // step: steps done so far
  double train_loss = 0, test_loss = 0, test_accuracy = 0, samples_per_second = 0;
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::vector<float> parameters;  // the final parameters (identical on every rank)
  double seconds = 0;
};

// Runs the whole training described by `config`. `out` receives rank 0's progress lines (other
// ranks may pass any stream; they print nothing).
TrainResult train(const RunConfig& config, Comm& comm, std::ostream& out);

// BLAS threads for this rank: train.threads if set, else this rank's share of the CPUs it may
// use (all of them when Slurm or the plugin already bound it to a subset).
int blas_threads_for_rank(int configured, int local_size);

}  // namespace slurm_train
