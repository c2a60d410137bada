#include "launcher/step_report.h"

#include <unistd.h>

#include <chrono>
#include <exception>

namespace slurm_train {

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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

void StepReport::ended(StepOutcome verdict) noexcept {
  if (path_.empty()) return;
  std::lock_guard lock(mutex_);
  if (ended_) return;
  ended_ = true;
  verdict.started_from = base_.started_from;
  verdict.started_unix = base_.started_unix;
  if (verdict.step == 0) verdict.step = base_.step;
  if (verdict.ended_unix == 0) verdict.ended_unix = unix_seconds_now();
  write(verdict);
}

void StepReport::write(const StepOutcome& outcome) noexcept {
  try {
    write_step_outcome(path_, outcome);
  } catch (const std::exception& e) {
    const std::string line =
        "slurm-train: warning: the step outcome for the in-job supervisor: " + std::string(e.what()) + "\n";
    [[maybe_unused]] const auto n = ::write(2, line.data(), line.size());
  }
}

}  // namespace slurm_train
