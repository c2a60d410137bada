// srun without an MPI plugin, named in one line.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "launcher/mpi_plugin_check.h"

using namespace slurm_train;

TEST_CASE("srun of several tasks without an MPI plugin is named in one line") {
  std::map<std::string, std::string> env = {{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}};
  CHECK(missing_mpi_plugin(env) ==
        "srun started 2 tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)");
  for (const char* pmi : {"PMIX_RANK", "PMI_FD", "OMPI_COMM_WORLD_RANK"}) {
    auto with = env;
    with[pmi] = "0";
    CHECK_FALSE(missing_mpi_plugin(with));
  }
  env["SLURM_NTASKS"] = "1";  // one task: MPI starts as a singleton
  CHECK_FALSE(missing_mpi_plugin(env));
  CHECK_FALSE(missing_mpi_plugin({{"SLURM_NTASKS", "4"}}));  // a batch script, not a step
}
