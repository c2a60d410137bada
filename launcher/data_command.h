// `slurm-train data import fashion-mnist|idx ...`: datasets into the HDF5 layout the engine reads.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_data_command(CLI::App& app);

}  // namespace slurm_train
