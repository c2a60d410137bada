#include "launcher/mpi_session.h"

#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace slurm_train {

namespace {

// An RDMA device (InfiniBand, RoCE, iWARP) on this node, as the kernel lists them.
bool has_rdma_device() {
  std::error_code ec;
  const std::filesystem::directory_iterator devices("/sys/class/infiniband", ec);
  return !ec && devices != std::filesystem::directory_iterator();
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  // Open MPI tries its UCX layer first, which probes every transport and declines on a node with
  // no RDMA device: 0.2 s of MPI_Init's 0.4 s on the local cluster. There ob1 (shared memory,
  // TCP) is what it ends up with anyway. A choice already in the environment stands.
  if (!has_rdma_device()) ::setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0);
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread failed (is the MPI launcher's environment intact?)");
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error("the MPI library does not provide MPI_THREAD_FUNNELED");
  }
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace slurm_train
