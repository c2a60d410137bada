// `slurm-train doctor [--config FILE] [--dir DIR ...]`: on a login node or inside a job (under
// srun every rank checks), one line per check with OK, WARN or FAIL; exit 1 on any FAIL.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_doctor_command(CLI::App& app, int& exit_code);

}  // namespace slurm_train
