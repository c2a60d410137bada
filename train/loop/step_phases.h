// The phases of one training step, marked and timed in one call: enter(phase, into) tells the
// hooks (the watchdog's heartbeat, injected faults) which phase this rank is in, and adds the
// time until the next enter() or close() to `into`. A hook's own time (an injected pause) counts
// in its phase, as the rank spends it there.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "train/loop/train_phase.h"

namespace slurm_train {

class StepPhases {
 public:
  using OnPhase = std::function<void(TrainPhase phase, std::uint64_t steps_done)>;

  StepPhases(const OnPhase& on_phase, std::uint64_t steps_done) : on_phase_(on_phase), steps_done_(steps_done) {}
  ~StepPhases() { close(); }
  StepPhases(const StepPhases&) = delete;
  StepPhases& operator=(const StepPhases&) = delete;

  void enter(TrainPhase phase, double* into = nullptr) {
    close();
    into_ = into;
    start_ = Clock::now();
    if (on_phase_) on_phase_(phase, steps_done_);
  }
  // Ends the current phase's timing.
  void close() {
    if (into_) *into_ += std::chrono::duration<double>(Clock::now() - start_).count();
    into_ = nullptr;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const OnPhase& on_phase_;
  std::uint64_t steps_done_;
  double* into_ = nullptr;
  Clock::time_point start_{};
};

}  // namespace slurm_train
