#include "launcher/mpi_plugin_check.h"

#include <fmt/format.h>

#include <charconv>

#include "launcher/launch_position.h"

namespace slurm_train {

std::optional<std::string> missing_mpi_plugin(const Environment& env) {
  const auto step = env.find("SLURM_STEP_ID"), ntasks = env.find("SLURM_NTASKS");
  if (step == env.end() || ntasks == env.end()) return std::nullopt;
  int tasks = 0;
  const std::string& n = ntasks->second;
  if (std::from_chars(n.data(), n.data() + n.size(), tasks).ec != std::errc() || tasks <= 1) return std::nullopt;
  for (const char* name : kMpiLauncherVariables)
    if (env.count(name)) return std::nullopt;
  return fmt::format("srun started {} tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)", tasks);
}

}  // namespace slurm_train
