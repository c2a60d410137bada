#include "launcher/mpi_plugin_check.h"

#include <fmt/format.h>

#include <array>
#include <charconv>

namespace slurm_train {

std::optional<std::string> missing_mpi_plugin(const Environment& env) {
  const auto step = env.find("SLURM_STEP_ID"), ntasks = env.find("SLURM_NTASKS");
  if (step == env.end() || ntasks == env.end()) return std::nullopt;
  int tasks = 0;
  const std::string& n = ntasks->second;
  if (std::from_chars(n.data(), n.data() + n.size(), tasks).ec != std::errc() || tasks <= 1) return std::nullopt;
  // PMIx (--mpi=pmix), PMI-2 (--mpi=pmi2), PMI-1, and mpirun / Open MPI's own launcher.
  constexpr std::array kPmiVariables = {"PMIX_RANK", "PMIX_NAMESPACE", "PMI_FD", "PMI_RANK", "PMI_SIZE",
                                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};
  for (const char* name : kPmiVariables)
    if (env.count(name)) return std::nullopt;
  return fmt::format("srun started {} tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)", tasks);
}

}  // namespace slurm_train
