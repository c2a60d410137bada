// A GPU training started by hand on a login node (no Slurm allocation, no MPI launcher, no GPU)
// would run on a shared machine that has no GPU for it: slurm-train says how to submit it
// instead. A machine that has a GPU (a workstation, a GPU node reached by ssh) trains on it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "spank/jobenv/environment.h"
#include "train/config/config.h"

namespace slurm_train {

// The message when `config` asks for a GPU (train.device = cuda), this process sees none
// (`gpus_visible` 0) and `env` shows neither a Slurm allocation (SLURM_JOB_ID) nor an MPI
// launcher (mpirun's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK); nullopt otherwise. `config_file`
// names the file for the suggested command.
std::optional<std::string> login_node_refusal(const RunConfig& config, const Environment& env,
                                              const std::string& config_file, int gpus_visible);

}  // namespace slurm_train
