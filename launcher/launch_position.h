// This process's rank and the job's size as the launcher (mpirun, srun) announced them in the
// environment, read before MPI starts: so that an error every rank finds alike before
// MPI_Init is printed once, by rank 0, and not once per rank.
#pragma once

#include <string>

#include "spank/jobenv/environment.h"

namespace slurm_train {

struct LaunchPosition {
  int rank = 0;
  int size = 1;
};

// mpirun's OMPI_COMM_WORLD_RANK/SIZE first (inside an sbatch script every process inherits the
// batch step's SLURM_PROCID=0), then PMIX_RANK and PMI_RANK/SIZE, then Slurm's SLURM_PROCID and
// SLURM_STEP_NUM_TASKS/SLURM_NTASKS. Alone, or with unreadable values: rank 0 of 1.
LaunchPosition launch_position(const Environment& env);

// mpirun and srun --kill-on-bad-exit end every rank at the first one that fails: a rank other
// than 0 that fails before MPI with an error rank 0 reports leaves a moment later (2 s), so that
// rank 0's message is not cut off. Returns at once for rank 0 and for a job of one rank.
void let_rank0_report_first(const LaunchPosition& launch);

}  // namespace slurm_train
