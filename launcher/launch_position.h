// This process's rank and the job's size as the launcher (mpirun, srun) announced them in the
// environment, read before MPI starts: so that an error every rank finds alike before
// MPI_Init is printed once, by rank 0, and not once per rank.
#pragma once

#include <array>
#include <string>

#include "spank/jobenv/environment.h"

namespace slurm_train {

// What an MPI launcher sets in each process it starts: PMIx (srun --mpi=pmix), PMI-2
// (--mpi=pmi2), PMI-1, and mpirun (Open MPI's own launcher).
inline constexpr std::array kMpiLauncherVariables = {
    "PMIX_RANK", "PMIX_NAMESPACE", "PMI_FD", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};

struct LaunchPosition {
  int rank = 0;
  int size = 1;
  bool mpi_launcher = false;  // mpirun or an srun MPI plugin (PMIx, PMI-2) started this process
  // MPI is needed unless this process is the whole world and no MPI launcher expects it to join
  // one: then a run works without any MPI installation (a GPU node with none, a workstation).
  bool needs_mpi() const { return mpi_launcher || size > 1; }
};

// mpirun's OMPI_COMM_WORLD_RANK/SIZE first (inside an sbatch script every process inherits the
// batch step's SLURM_PROCID=0), then PMIX_RANK and PMI_RANK/SIZE, then Slurm's SLURM_PROCID and
// SLURM_STEP_NUM_TASKS/SLURM_NTASKS. Alone, or with unreadable values: rank 0 of 1.
// mpi_launcher: any variable of mpirun, PMIx, PMI-2 or PMI-1 is set.
LaunchPosition launch_position(const Environment& env);

// mpirun and srun --kill-on-bad-exit end every rank at the first one that fails: a rank other
// than 0 that fails before MPI with an error rank 0 reports leaves a moment later (2 s), so that
// rank 0's message is not cut off. Returns at once for rank 0 and for a job of one rank.
void let_rank0_report_first(const LaunchPosition& launch);

}  // namespace slurm_train
