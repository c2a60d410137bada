#include "launcher/launch_position.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("launch position: from mpirun, PMIx or Slurm, before MPI starts") {
  CHECK(launch_position({}).rank == 0);
  CHECK(launch_position({}).size == 1);
  const auto srun = launch_position({{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NTASKS", "8"}});
  CHECK(srun.rank == 3);
  CHECK(srun.size == 4);
  // mpirun inside a batch script: every process inherits the batch step's SLURM_PROCID=0.
  const auto mpirun = launch_position(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK(mpirun.rank == 2);
  CHECK(mpirun.size == 4);
  CHECK(launch_position({{"PMIX_RANK", "1"}, {"SLURM_PROCID", "1"}}).rank == 1);
  const auto garbled = launch_position({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "0"}});
  CHECK(garbled.rank == 0);
  CHECK(garbled.size == 1);
}
