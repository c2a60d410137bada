// The restart record kept beside the checkpoints (<ckpt.dir>/restarts): how often the job has
// started again without getting past the step it started from the time before. A job that keeps
// being preempted (or crashing) before its next checkpoint would otherwise requeue forever.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "train/io/trusted_folder.h"

namespace slurm_train {

struct RestartRecord {
  std::uint64_t starts = 0;                     // runs that have begun in this folder
  std::uint64_t restarts_without_progress = 0;  // consecutive starts from the same step
  std::uint64_t last_start_step = 0;            // the step the latest run started from
  std::uint64_t last_step_reached = 0;          // the step the latest run got to (at its end)
};

// The record after a run that starts (resumed or fresh) from `start_step`.
RestartRecord next_start(const std::optional<RestartRecord>& previous, std::uint64_t start_step);

// `slurm-train exec`'s record after a preempted run, which knows only what the program reported:
// the step it reached (its heartbeat file's number), or without one how long it ran. A run makes
// progress when it reaches a later step than the run before, or, without steps, when it runs a
// minute or more (its key, kept in last_start_step, counts those minutes over all runs).
RestartRecord next_exec_record(const std::optional<RestartRecord>& previous, std::optional<std::uint64_t> step_reached,
                               double seconds_run);

// max_without_progress == 0: never give up.
bool should_give_up(const RestartRecord& record, std::uint64_t max_without_progress);

std::string format_restart_record(const RestartRecord& record);
// Throws std::invalid_argument naming the line it cannot read.
RestartRecord parse_restart_record(const std::string& text);

// <dir>/restarts in the folder that holds it (the checkpoint folder of `run`, the log folder of
// `exec`), read (nullopt when absent; an unreadable record is an error naming the path) and
// replaced durably (train/io/durable_file.h).
std::optional<RestartRecord> read_restart_record(const TrustedFolder& dir);
void write_restart_record(const TrustedFolder& dir, const RestartRecord& record);

}  // namespace slurm_train
