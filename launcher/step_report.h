// Rank 0's side of the step outcome file (step_outcome.h): where training started, and the
// verdict once the step ends, written to the path the in-job supervisor gives in
// SLURM_TRAIN_STEP_REPORT. Thread-safe: the watchdog's thread may end the job.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "launcher/step_outcome.h"

namespace slurm_train {

class StepReport {
 public:
  // "" : no supervisor asked; every call does nothing.
  explicit StepReport(std::string path) : path_(std::move(path)) {}

  // Training starts (or resumes) at `from_step` now.
  void started(std::uint64_t from_step);
  // The step's verdict (the first one counts); its time, start and step reached filled in where
  // `verdict` leaves them empty. A file that cannot be written is a warning on stderr.
  void ended(StepOutcome verdict) noexcept;

 private:
  void write(const StepOutcome& outcome) noexcept;

  std::mutex mutex_;
  const std::string path_;
  StepOutcome base_;
  bool ended_ = false;
};

// Unix time in seconds, to the microsecond.
double unix_seconds_now();

}  // namespace slurm_train
