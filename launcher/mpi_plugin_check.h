// srun without an MPI plugin (no --mpi=pmix and MpiDefault=none) starts the tasks with no PMI
// server: MPI_Init then fails in every task with a page of Open MPI's text. The launcher looks
// for that before MPI_Init and says in one line what to add.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "spank/jobenv/environment.h"

namespace slurm_train {

// The one-line message when `env` shows a Slurm step of more than one task (SLURM_STEP_ID set,
// SLURM_NTASKS > 1) and none of the variables a PMI server or an MPI launcher sets; nullopt
// otherwise (a single task initializes MPI alone, as a singleton).
std::optional<std::string> missing_mpi_plugin(const Environment& env);

}  // namespace slurm_train
