// `slurm-train submit CONFIG [--nodes N --gpus-per-node G --time T --partition P ...]`: writes
// the sbatch script for a training, prints it (--dry-run) or submits it.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_submit_command(CLI::App& app);

}  // namespace slurm_train
