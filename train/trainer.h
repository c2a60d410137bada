// The training loop: data-parallel training of the MLP on every rank, with the global batch
// split over ranks, gradients all-reduced in buckets during backward, and an evaluation on the
// test set (sharded over ranks) after each epoch. Rank 0 prints one line per epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "train/comm.h"
#include "train/config.h"
#include "train/metrics.h"
#include "train/prometheus.h"
#include "train/train_phase.h"

namespace slurm_train {

struct EpochResult {
  std::uint64_t epoch = 0, step = 0;  // step: steps done so far
  double train_loss = 0, test_loss = 0, test_accuracy = 0, samples_per_second = 0;
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::uint64_t first_step = 0;  // > 0 when resumed from a checkpoint
  std::uint64_t steps_done = 0;  // global steps done when train() returned
  bool stopped_early = false;    // train.stop_after or a hook ended it before the last step
  bool already_complete = false; // resumed from a checkpoint of the last step: nothing trained
  std::string resumed_from;      // the checkpoint's path (rank 0), or ""
  std::vector<float> parameters;  // the final parameters (identical on every rank)
  double seconds = 0;
};

// What the training loop does at a step boundary, as a hook answers it.
enum class StepDecision { kContinue, kSave, kSaveAndStop };

struct TrainHooks {
  // Called on every rank after each step with the global steps done. It must give the same
  // answer on every rank (the launcher's preemption handler folds its signal flag into a
  // collective first). kSave checkpoints now (with ckpt.dir set); kSaveAndStop also ends
  // train() after the write has finished, with stopped_early set.
  std::function<StepDecision(std::uint64_t steps_done)> after_step;
  // Called on every rank as it enters each phase, with the steps done so far: the watchdog's
  // heartbeat, and where injected faults strike.
  std::function<void(TrainPhase phase, std::uint64_t steps_done)> on_phase;
  // Called on every rank after each step with its metrics: the progress display and rank logs.
  std::function<void(const StepMetrics& metrics, std::uint64_t total_steps)> on_step;
  // A testing aid (--inject-fault nan@STEP:RANK): true makes this rank's loss of that step NaN,
  // as a diverged training would.
  std::function<bool(std::uint64_t step)> inject_nan;
  // A testing aid (--inject-fault slow-ckpt@MS): checkpoints are written 64 KiB at a time with a
  // pause of MS after each, so that a test can kill the run in the middle of a write.
  unsigned slow_checkpoint_ms = 0;
  // The run's id, written as "run" in every metrics line (the launcher's job id); "": none.
  std::string run_id;
  // The job as train.prometheus labels it (the launcher's reading of the environment); the
  // trainer fills in the world size.
  PrometheusLabels prometheus;
};

// Runs the whole training described by `config`. `out` receives rank 0's progress lines (other
// ranks may pass any stream; they print nothing). With ckpt.dir set it resumes from the newest
// valid checkpoint there (unless ckpt.resume is false) and saves checkpoints as configured.
TrainResult train(const RunConfig& config, Comm& comm, std::ostream& out, const TrainHooks& hooks = {});

// BLAS threads for this rank: train.threads if set, else this rank's share of the CPUs it may
// use (all of them when Slurm or the plugin already bound it to a subset).
int blas_threads_for_rank(int configured, int local_size);

}  // namespace slurm_train
