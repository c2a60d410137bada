// The NCCL implementation of Comm, for the CUDA path (built only with SLURM_TRAIN_WITH_CUDA).
// Every data pointer given to it is a device pointer. Bootstrap: rank 0 draws the NCCL unique id
// and broadcasts it over the bootstrap Comm (MPI); barrier and the rank facts come from there too.
//
// Ordering: collectives run on the communicator's own stream. Each one first waits (an event,
// not the host) for the work queued so far on the compute stream, so that a gradient bucket
// starts reducing as soon as backward has written it while backward goes on; wait_all() then
// makes the compute stream wait for every reduction, and meanwhile polls ncclCommGetAsyncError:
// a failed or unreachable peer becomes ncclCommAbort (which frees this rank's kernels stuck on
// it) and a CommError naming the error, for the launcher's handler to tear the job down.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <memory>

#include "train/comm/comm.h"

namespace slurm_train {

struct NcclOptions {
  int device = 0;                  // the GPU this rank drives (cudaSetDevice)
  cudaStream_t compute = nullptr;  // the stream whose work the collectives follow
  // wait_all() gives up after this long without completion (a hung peer) and aborts.
  std::chrono::seconds timeout{600};
};

std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, const NcclOptions& options);

}  // namespace slurm_train
