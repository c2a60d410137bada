// The launcher's side of `slurm-train run`'s training loop, as the loop's hooks (TrainHooks):
// the watchdog's progress, the faults to inject, the preemption decision, the progress display,
// the start-up line and the restart record that rank 0 keeps beside the checkpoints.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "launcher/console.h"
#include "launcher/fault_injection.h"
#include "launcher/progress_line.h"
#include "launcher/restart_env.h"
#include "launcher/restart_record.h"
#include "launcher/step_report.h"
#include "launcher/watchdog.h"
#include "train/comm/comm.h"
#include "train/config/config.h"
#include "train/io/trusted_folder.h"
#include "train/loop/trainer.h"

namespace slurm_train {

class RunHooks {
 public:
  using Clock = std::chrono::steady_clock;

  RunHooks(const RunConfig& config, Comm& comm, Watchdog& watchdog, Console& console, const FaultPlan& faults,
           Clock::time_point started)
      : config_(config),
        comm_(comm),
        watchdog_(watchdog),
        console_(console),
        faults_(faults),
        started_(started),
        phase_started_(Clock::now()) {}

  // Ends the start-up phase `what` now: its time goes into the start-up line.
  void mark_startup(const std::string& what);
  // The hooks the training loop calls (they refer to this object, which must outlive the loop).
  TrainHooks hooks();

  // Rank 0: training's start goes into `report` (for the in-job supervisor), and a restart inside
  // the job says how long after the failure its first step came.
  void report_to(StepReport& report, const RestartEnv& restart) {
    report_ = &report;
    restart_ = restart;
  }

  // Rank 0: the checkpoint folder as the claim holds it: the restart record goes there. Without
  // it (no ckpt.dir) there is no record.
  void keep_records_in(const TrustedFolder& folder) { records_ = &folder; }

  std::uint64_t first_step() const { return first_step_; }
  const std::optional<RestartRecord>& record() const { return record_; }
  // Why the loop refused to start (TrainResult::refused_start); rank 0 knows the count.
  std::string give_up_message() const;
  // Rank 0: the restart record's last step reached, at the end of the run.
  void finish_record(std::uint64_t steps_done);

 private:
  void on_phase(TrainPhase p, std::uint64_t done);
  // Before the first step: the start-up line, and the restart record, which rank 0 keeps beside
  // the checkpoints and decides from for everyone (the loop broadcasts its answer).
  bool may_start(std::uint64_t first_step);
  // A record that cannot be written is a failure of the checkpoint storage (exit 3).
  void write_record(const RestartRecord& record) const;
  void on_step(const StepMetrics& m, std::uint64_t total);

  const RunConfig& config_;
  Comm& comm_;
  Watchdog& watchdog_;
  Console& console_;
  const FaultPlan& faults_;
  StepReport* report_ = nullptr;
  const TrustedFolder* records_ = nullptr;
  RestartEnv restart_;
  Clock::time_point started_, phase_started_, last_live_{};
  std::string startup_;
  bool startup_open_ = true, resuming_ = false;
  std::uint64_t first_step_ = 0;
  std::optional<RestartRecord> record_;
  MovingMean window_, losses_{20};
};

}  // namespace slurm_train
