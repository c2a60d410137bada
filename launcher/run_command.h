// `slurm-train run --config FILE [--section.key=value ...]`: trains on every rank.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_run_command(CLI::App& app, int& exit_code);

}  // namespace slurm_train
