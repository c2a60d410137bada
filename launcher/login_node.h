// A GPU training started by hand on a login node (no Slurm allocation, no MPI launcher) would
// run on a shared machine that has no GPU for it: slurm-train says how to submit it instead.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "spank/jobenv/environment.h"
#include "train/config.h"

namespace slurm_train {

// The message when `config` asks for a GPU (train.device = cuda) and `env` shows neither a Slurm
// allocation (SLURM_JOB_ID) nor an MPI launcher (mpirun's OMPI_COMM_WORLD_SIZE, PMIx's
// PMIX_RANK); nullopt otherwise. `config_file` names the file for the suggested command.
std::optional<std::string> login_node_refusal(const RunConfig& config, const Environment& env,
                                              const std::string& config_file);

}  // namespace slurm_train
