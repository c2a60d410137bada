// Rank 0's side of the step outcome file (step_outcome.h): where training started, and the
// verdict once the step ends, written to the path the in-job supervisor gives in
// SLURM_TRAIN_STEP_REPORT. The file's folder (the supervisor's log folder, which it made and
// judged) is opened as a folder of the job's at the first write (train/io/trusted_folder.h) and
// held: the file is replaced through it, never written by a path that another user could
// redirect. Thread-safe: the watchdog's thread may end the job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "launcher/step_outcome.h"
#include "train/io/trusted_folder.h"

namespace slurm_train {

class StepReport {
 public:
  // "" : no supervisor asked; every call does nothing.
  explicit StepReport(std::string path)
      : path_(std::move(path)), name_(std::filesystem::path(path_).filename().string()) {}

  // Every rank reached rank 0's watchdog: the launch and MPI's start-up are done.
  void connected();
  // Training starts (or resumes) at `from_step` now.
  void started(std::uint64_t from_step);
  // Rank 0 finished `step` steps: written at most every 0.25 s (renamed into place, not synced), so
  // that the step reached is known when rank 0 is lost without a verdict.
  void reached(std::uint64_t step) noexcept;
  // The step's verdict (the first one counts, also one another rank wrote); its time, start and
  // step reached filled in where `verdict` leaves them empty. A file that cannot be written is a
  // warning on stderr.
  void ended(StepOutcome verdict) noexcept;

 private:
  void write(const StepOutcome& outcome, bool durable = true) noexcept;
  // Opened at the first use; throws as TrustedFolder does.
  const TrustedFolder& folder();

  std::mutex mutex_;
  const std::string path_, name_;
  std::optional<TrustedFolder> folder_;
  StepOutcome base_;
  bool ended_ = false;
  double last_written_ = 0;  // unix seconds
};

// Unix time in seconds, to the microsecond.
double unix_seconds_now();

}  // namespace slurm_train
