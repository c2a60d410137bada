// The environment through which the in-job supervisor (`slurm-train srun`) tells each new step
// that it is a restart: SLURM_TRAIN_RESTART_COUNT (0 in the first attempt), SLURM_TRAIN_RESTART_CAUSE
// (what ended the step before, in a few words), SLURM_TRAIN_FAILURE_TIME (when, Unix seconds)
// and SLURM_TRAIN_STEP_REPORT (where rank 0 writes the step's outcome, step_outcome.h). `run`
// and `exec` read it; a user's program sees the first two. Pure.
#pragma once

#include <string>

#include "spank/jobenv/environment.h"

namespace slurm_train {

inline constexpr const char* kRestartCountVar = "SLURM_TRAIN_RESTART_COUNT";
inline constexpr const char* kRestartCauseVar = "SLURM_TRAIN_RESTART_CAUSE";
inline constexpr const char* kFailureTimeVar = "SLURM_TRAIN_FAILURE_TIME";
inline constexpr const char* kStepReportVar = "SLURM_TRAIN_STEP_REPORT";

struct RestartEnv {
  int count = 0;  // restarts inside the job before this step
  std::string cause;
  double failure_unix = 0;  // 0: not known
  std::string report_path;  // "": no supervisor asked for one
};

// Throws std::invalid_argument naming the variable and its value when one is malformed.
RestartEnv restart_env_of(const Environment& env);

}  // namespace slurm_train
