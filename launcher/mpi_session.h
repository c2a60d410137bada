// MPI for the lifetime of a command: MPI_Init_thread on construction (funneled: only the main
// thread calls MPI; the prefetch thread never does), MPI_Finalize on destruction. Works as a
// single process with no launcher, under mpirun and under srun --mpi=pmix.
#pragma once

namespace slurm_train {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

}  // namespace slurm_train
