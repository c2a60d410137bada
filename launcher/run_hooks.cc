#include "launcher/run_hooks.h"

#include <fmt/format.h>

#include <csignal>
#include <thread>

#include "launcher/preempt_signals.h"
#include "train/checkpoint/checkpoint_file.h"

namespace slurm_train {

void RunHooks::mark_startup(const std::string& what) {
  const auto now = Clock::now();
  startup_ += fmt::format("{}{} {:.2f} s", startup_.empty() ? "" : ", ", what,
                          std::chrono::duration<double>(now - phase_started_).count());
  phase_started_ = now;
}

TrainHooks RunHooks::hooks() {
  TrainHooks h;
  h.on_phase = [this](TrainPhase p, std::uint64_t done) { on_phase(p, done); };
  h.on_step = [this](const StepMetrics& m, std::uint64_t total) { on_step(m, total); };
  h.may_start = [this](std::uint64_t first_step) { return may_start(first_step); };
  h.stop_signal = [] { return preemption_signal_received(); };
  if (comm_.rank() == 0) h.stragglers = [this] { return watchdog_.take_new_stragglers(); };
  if (faults_.nan) h.inject_nan = [this](std::uint64_t step) { return nan_at(faults_, step, comm_.rank()); };
  h.slow_checkpoint_ms = faults_.slow_checkpoint_ms;
  return h;
}

void RunHooks::on_phase(TrainPhase p, std::uint64_t done) {
  watchdog_.progress().set(p, done);
  if (startup_open_) {
    // Start-up phases, timed until may_start().
    if (p == TrainPhase::kBroadcast) mark_startup("data");
    if (p == TrainPhase::kResume) {
      mark_startup("parameters");
      resuming_ = true;
    }
  }
  if (p == TrainPhase::kData && faults_.slow_ms > 0 && (faults_.slow_rank < 0 || faults_.slow_rank == comm_.rank()))
    std::this_thread::sleep_for(std::chrono::milliseconds(faults_.slow_ms));
  if (p == TrainPhase::kForward) {
    switch (fault_at(faults_, done, comm_.rank())) {
      case FaultAction::kCrash:
        console_.line(fmt::format("--inject-fault: rank {} kills itself (SIGKILL) at step {}", comm_.rank(), done));
        std::raise(SIGKILL);
        break;
      case FaultAction::kHang:
        console_.line(fmt::format("--inject-fault: rank {} hangs at step {}", comm_.rank(), done));
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      case FaultAction::kNone:
        break;
    }
  }
}

bool RunHooks::may_start(std::uint64_t first_step) {
  mark_startup(resuming_ ? "resume" : "parameters");
  startup_open_ = false;
  first_step_ = first_step;
  const double since_start = std::chrono::duration<double>(Clock::now() - started_).count();
  const auto unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  if (comm_.rank() != 0) return true;
  console_.line(fmt::format("start-up: {}; first step {:.2f} s after start (unix time {}.{:03})", startup_, since_start,
                            unix_ms / 1000, unix_ms % 1000));
  if (report_) report_->started(first_step);
  if (restart_.count > 0 && restart_.failure_unix > 0)
    console_.line(fmt::format("restart {} inside the job ({}): from step {}, the first step {:.2f} s after the failure",
                              restart_.count, restart_.cause.empty() ? "cause unknown" : restart_.cause, first_step,
                              static_cast<double>(unix_ms) / 1e3 - restart_.failure_unix));
  if (!records_) return true;
  std::optional<RestartRecord> previous;
  if (config_.ckpt.resume) previous = read_restart_record(*records_);
  record_ = next_start(previous, first_step_);
  write_record(*record_);
  if (record_->restarts_without_progress > 0)
    console_.line(
        fmt::format("restart {} of this job from step {}: {} in a row without progress (the limit is "
                    "--max-restarts-without-progress={})",
                    record_->starts - 1, first_step_, record_->restarts_without_progress,
                    config_.run.max_restarts_without_progress));
  return !should_give_up(*record_, static_cast<std::uint64_t>(config_.run.max_restarts_without_progress));
}

std::string RunHooks::give_up_message() const {
  return fmt::format(
      "started {} times in a row from step {} without getting further (more than "
      "--max-restarts-without-progress={}); not training again. Look at the rank logs for why "
      "it made no progress, then delete {}/restarts to try again",
      record_ ? record_->restarts_without_progress : 0, first_step_, config_.run.max_restarts_without_progress,
      config_.ckpt.dir);
}

void RunHooks::write_record(const RestartRecord& record) const {
  try {
    write_restart_record(*records_, record);
  } catch (const std::runtime_error& e) {
    throw CheckpointWriteError(e.what());
  }
}

void RunHooks::finish_record(std::uint64_t steps_done) {
  if (comm_.rank() != 0 || !record_ || !records_) return;
  record_->last_step_reached = steps_done;
  write_record(*record_);
}

void RunHooks::on_step(const StepMetrics& m, std::uint64_t total) {
  watchdog_.progress().add_compute(m.times.total() - m.times.comm_wait);
  window_.add(m.times.total());
  losses_.add(m.loss);
  const std::uint64_t done = m.step + 1;
  if (report_) report_->reached(done);
  const auto every = static_cast<std::uint64_t>(config_.train.log_every);
  const double eta = window_.mean() * static_cast<double>(total - done);
  // Over the recent steps, as the loss: one step's rate jumps with every evaluation and save.
  const double rate = window_.mean() > 0 ? m.samples_per_second * m.times.total() / window_.mean() : 0;
  const bool due = every > 0 && (done % every == 0 || done == total);
  if (comm_.rank() == 0 && console_.is_terminal()) {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_live_).count() >= 0.25 || done == total) {
      last_live_ = now;
      console_.progress(format_progress(done, total, losses_.mean(), rate, eta, m.tokens_per_sample));
    }
  } else if (due) {
    console_.line(format_progress(done, total, losses_.mean(), rate, eta, m.tokens_per_sample) +
                  (comm_.rank() == 0 ? ""
                                     : fmt::format("  (this rank: data {:.1f} ms, all-reduce wait {:.1f} ms)",
                                                   1e3 * m.times.data, 1e3 * m.times.comm_wait)));
  }
}

}  // namespace slurm_train
