#include "launcher/login_node.h"

#include <fmt/format.h>

namespace slurm_train {

std::optional<std::string> login_node_refusal(const RunConfig& config, const std::map<std::string, std::string>& env,
                                              const std::string& config_file, int gpus_visible) {
  if (config.train.device != "cuda" || gpus_visible > 0) return std::nullopt;
  for (const char* key : {"SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"})
    if (env.count(key)) return std::nullopt;
  const std::string file = config_file.empty() ? "CONFIG" : config_file;
  return fmt::format(
      "train.device = cuda, but this shell has no Slurm allocation (SLURM_JOB_ID is not set): this looks like a "
      "login node, which is not for training. Submit it to the GPU nodes instead:\n"
      "  slurm-train submit {0} --nodes 1 --gpus-per-node 1 --time 1:00:00   (prints the job id and where the logs "
      "go)\n"
      "or, interactively: salloc --gpus-per-node=1, then srun --mpi=pmix slurm-train run --config {0}",
      file);
}

}  // namespace slurm_train
