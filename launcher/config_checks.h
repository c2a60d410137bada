// The checks of a training configuration against the files it names, shared by `run --dry-run`
// and `doctor --config`: datasets readable and shaped right, output folders writable.
#pragma once

#include <vector>

#include "launcher/doctor_checks.h"
#include "train/config.h"

namespace slurm_train {

std::vector<Check> check_configuration(const RunConfig& config, const Environment& env);

}  // namespace slurm_train
