// The measurement behind `slurm-train doctor --allreduce`, on every rank of a job: all-reduce
// sums of float32 from 8 B up to a largest size (allreduce_sweep.h reports them as nccl-tests
// does), checked for wrong elements, then each link of a ring over the job's nodes timed alone.
// NCCL on GPUs where this build has CUDA and the rank sees a GPU, MPI on CPUs otherwise.
#pragma once

#include <cstddef>
#include <ostream>

#include "train/comm/comm.h"

namespace slurm_train {

struct AllreduceProbeOptions {
  std::size_t max_bytes = std::size_t{64} << 20;
  double seconds = 60;   // the sweep stops before a size that would pass this bound
  double min_busbw = 0;  // GB/s at the largest size measured; below it the probe fails (0: none)
};

// Collective: every rank of `comm` calls it. Rank 0 writes the report to `out`; every rank
// returns whether the probe passed (no wrong element, the floor met).
bool run_allreduce_probe(Comm& comm, const AllreduceProbeOptions& options, std::ostream& out);

}  // namespace slurm_train
