// The variables of the contract between the plugin and whatever runs in its tasks (the
// launcher, `doctor`, a user's framework): the plugin exports them, the launcher reads them.
// One list, so that neither side can rename one alone. Slurm's own variables are not here.
#pragma once

namespace slurm_train::env_names {

// Rendezvous, as torchrun sets them: any framework starts from these under plain srun.
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kNodeRank = "NODE_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";

// What the plugin decided for the task; kPlugin (its version) says the plugin ran at all.
inline constexpr const char* kPlugin = "SLURM_TRAIN_PLUGIN";
inline constexpr const char* kBind = "SLURM_TRAIN_BIND";
inline constexpr const char* kNccl = "SLURM_TRAIN_NCCL";
inline constexpr const char* kEnv = "SLURM_TRAIN_ENV";
inline constexpr const char* kGpus = "SLURM_TRAIN_GPUS";
inline constexpr const char* kCpus = "SLURM_TRAIN_CPUS";

// The plugin's options' environment forms (sbatch/srun read them as the options' defaults).
inline constexpr const char* kVerbose = "SLURM_TRAIN_VERBOSE";

}  // namespace slurm_train::env_names
