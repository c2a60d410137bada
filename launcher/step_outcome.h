// What one step of a job ended with, as its rank 0 saw it: the file through which `run` tells
// the in-job supervisor (`slurm-train srun`, srun_command.h) why its step ended, which rank and
// host were at fault, and how far training got. The supervisor names the file in
// SLURM_TRAIN_STEP_REPORT; rank 0 rewrites it (atomically) when training starts and when the step
// ends. Pure but for the two file functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/io/trusted_folder.h"

namespace slurm_train {

enum class StepCause {
  kRunning,          // no verdict yet: the step is under way (or its rank 0 died before one)
  kDone,             // training finished
  kRankLost,         // a rank's connection closed without a word: killed, out of memory, its node lost
  kRankFailed,       // a rank reported an error (named in the message)
  kHang,             // the watchdog found a rank without progress
  kNeverConnected,   // ranks never reached rank 0
  kDiverged,         // a loss or gradient norm not finite
  kConfig,           // a usage or configuration error
  kCheckpointWrite,  // a checkpoint could not be written
  kPreempted,        // preempted: checkpoint written (requeued or not)
  kGaveUp,           // too many restarts without progress
  kFolderBusy,       // ckpt.dir belongs to another running job
  kOutOfMemory,      // a rank's program was killed by the out-of-memory killer (exec)
  kLast = kOutOfMemory,
};

struct StepOutcome {
  StepCause cause = StepCause::kRunning;
  int exit_code = 0;
  int rank = -1;                        // the rank at fault, -1: none named
  std::string host;                     // its host
  std::uint64_t step = 0;               // the step the rank at fault (or rank 0) had reached
  std::uint64_t started_from = 0;       // the step this step's training started from
  double connected_unix = 0;            // when every rank had reached rank 0's watchdog; 0: not yet
  double started_unix = 0;              // when its first training step began (Unix time, s); 0: not yet
  double ended_unix = 0;                // when the verdict was reached; 0: not yet
  std::string message;                  // the error line
  std::vector<std::string> stragglers;  // hosts of the ranks named stragglers during the step
  std::string gpu_fault;                // the rank at fault's last Xid or ECC error, "" when none
};

const char* cause_name(StepCause cause);
// Throws std::invalid_argument naming the text.
StepCause parse_cause(const std::string& name);

// The cause `run`'s exit code stands for, where it stands for one alone (1 does not: kRankFailed).
StepCause cause_of_exit_code(int exit_code);

// A verdict of `exit_code`'s cause, at `step`, with its message; no rank named.
StepOutcome step_verdict(int exit_code, std::string message, std::uint64_t step = 0);

std::string format_step_outcome(const StepOutcome& outcome);
// Throws std::invalid_argument saying what is wrong with `text`.
StepOutcome parse_step_outcome(const std::string& text);

// NAME in the supervisor's log folder, written durably (temporary file, fsync, rename); read:
// nullopt when the file is absent, an error naming the path when it cannot be read.
void write_step_outcome(const TrustedFolder& dir, const std::string& name, const StepOutcome& outcome);
std::optional<StepOutcome> read_step_outcome(const TrustedFolder& dir, const std::string& name);

}  // namespace slurm_train
