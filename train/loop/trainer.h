// The training loop: data-parallel training on every rank of the step the configuration asks for
// (model_step.h), with the global batch split over ranks, and an evaluation on the test set
// (sharded over ranks) after each epoch. Rank 0 prints one line per epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "train/comm/comm.h"
#include "train/config/config.h"
#include "train/io/host_vector.h"
#include "train/loop/metrics.h"
#include "train/loop/prometheus.h"
#include "train/loop/train_phase.h"

namespace slurm_train {

struct EpochResult {
  std::uint64_t epoch = 0, step = 0;  // step: steps done so far
  double train_loss = 0, test_loss = 0, test_accuracy = 0, samples_per_second = 0;
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::uint64_t first_step = 0;   // > 0 when resumed from a checkpoint
  std::uint64_t steps_done = 0;   // global steps done when train() returned
  bool stopped_early = false;     // train.stop_after or a stop signal ended it before the last step
  bool already_complete = false;  // resumed from a checkpoint of the last step: nothing trained
  bool refused_start = false;     // TrainHooks::may_start said no (on rank 0): nothing trained
  int stop_signal = 0;            // the signal that stopped it (TrainHooks::stop_signal), or 0
  int stop_signal_ranks = 0;      // how many ranks had received it
  std::string resumed_from;       // the checkpoint's path (rank 0), or ""
  HostVector<float> parameters;   // the final parameters (identical on every rank)
  double seconds = 0;
};

struct TrainHooks {
  // Called on every rank as it enters each phase, with the steps done so far: the watchdog's
  // heartbeat, and where injected faults strike.
  std::function<void(TrainPhase phase, std::uint64_t steps_done)> on_phase;
  // Called on every rank once the start-up is done (data, parameters, resume), before the first
  // step, with the step it starts at: the launcher reports the start-up there and rank 0 keeps
  // its restart record. Rank 0's answer counts (the loop broadcasts it): false ends train() at
  // once with refused_start set.
  std::function<bool(std::uint64_t first_step)> may_start;
  // The stop signal this rank has received so far (0: none). Not a collective: the loop folds it
  // into the step's loss all-reduce (stop_votes.h), so that every rank checkpoints and stops
  // after the same step.
  std::function<int()> stop_signal;
  // Called on every rank after each step with its metrics: the progress display and rank logs.
  std::function<void(const StepMetrics& metrics, std::uint64_t total_steps)> on_step;
  // A testing aid (--inject-fault nan@STEP:RANK): true makes this rank's loss of that step NaN,
  // as a diverged training would.
  std::function<bool(std::uint64_t step)> inject_nan;
  // A testing aid (--inject-fault slow-ckpt@MS): checkpoints are written 64 KiB at a time with a
  // pause of MS after each, so that a test can kill the run in the middle of a write.
  unsigned slow_checkpoint_ms = 0;
  // Rank 0, after each step: the ranks the launcher named stragglers since the last call, for the
  // metrics file and the Prometheus file.
  std::function<std::vector<RankSlowdown>()> stragglers;
  // The run's id, written as "run" in every metrics line (the launcher's job id); "": none.
  std::string run_id;
  // This rank's GPUs as the launcher samples them, nullopt on a rank without any: `now` asks for
  // a reading taken at once (the energy counters at the first and last step), else the latest.
  // Rank 0's utilisation and power join the epoch line; every rank's energy gives the run's.
  std::function<std::optional<GpuReading>(bool now)> gpu;
  // The job as train.prometheus labels it (the launcher's reading of the environment); the
  // trainer fills in the world size.
  PrometheusLabels prometheus;
};

// Runs the whole training described by `config`. `out` receives rank 0's progress lines (other
// ranks may pass any stream; they print nothing). With ckpt.dir set it resumes from the newest
// valid checkpoint there (unless ckpt.resume is false) and saves checkpoints as configured.
TrainResult train(const RunConfig& config, Comm& comm, std::ostream& out, const TrainHooks& hooks = {});

}  // namespace slurm_train
