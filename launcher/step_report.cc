#include "launcher/step_report.h"

#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <stdexcept>

namespace slurm_train {

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void StepReport::connected() {
  if (path_.empty()) return;
  std::lock_guard lock(mutex_);
  if (ended_) return;
  base_.connected_unix = unix_seconds_now();
  write(base_);
}

void StepReport::started(std::uint64_t from_step) {
  if (path_.empty()) return;
  std::lock_guard lock(mutex_);
  if (ended_) return;
  base_.started_from = from_step;
  base_.step = from_step;
  base_.started_unix = unix_seconds_now();
  write(base_);
}

void StepReport::reached(std::uint64_t step) noexcept {
  if (path_.empty()) return;
  std::lock_guard lock(mutex_);
  if (ended_ || base_.started_unix == 0) return;
  base_.step = step;
  if (const double now = unix_seconds_now(); now - last_written_ >= 0.25) write(base_, false);
}

void StepReport::ended(StepOutcome verdict) noexcept {
  if (path_.empty()) return;
  std::lock_guard lock(mutex_);
  if (ended_) return;
  ended_ = true;
  // Rank 1 writes the verdict when rank 0 went silent: the first verdict on file stands, and a
  // rank other than 0 takes the start rank 0 wrote.
  try {
    if (const auto on_file = read_step_outcome(folder(), name_)) {
      if (on_file->ended_unix > 0) return;
      if (base_.started_unix == 0) base_ = *on_file;
    }
  } catch (const std::exception&) {
    // Torn or foreign, or the folder cannot be opened (write() says so): replaced.
  }
  verdict.started_from = base_.started_from;
  verdict.started_unix = base_.started_unix;
  if (verdict.connected_unix == 0) verdict.connected_unix = base_.connected_unix;
  if (verdict.step == 0) verdict.step = base_.step;
  if (verdict.ended_unix == 0) verdict.ended_unix = unix_seconds_now();
  write(verdict);
}

const TrustedFolder& StepReport::folder() {
  if (!folder_) {
    const std::filesystem::path p(path_);
    folder_.emplace("the log folder", p.parent_path().empty() ? "." : p.parent_path().string(), false);
  }
  return *folder_;
}

void StepReport::write(const StepOutcome& outcome, bool durable) noexcept {
  last_written_ = unix_seconds_now();
  try {
    if (durable)
      write_step_outcome(folder(), name_, outcome);
    else
      folder().replace_unsynced(name_, format_step_outcome(outcome));
  } catch (const std::exception& e) {
    const std::string line =
        "slurm-train: warning: the step outcome for the in-job supervisor: " + std::string(e.what()) + "\n";
    [[maybe_unused]] const auto n = ::write(2, line.data(), line.size());
  }
}

}  // namespace slurm_train
