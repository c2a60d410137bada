// Communication among the ranks of a job, behind one interface: MPI (comm_mpi.cc), and NCCL for
// the CUDA path (comm_nccl.h). Every failure throws CommError naming the call, the rank, the
// host, the file and line; the launcher's one top-level handler then tears the whole job down
// (abort) rather than let one rank exit while the others hang.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train {

struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An error that every rank throws at the same point, because the ranks agreed on it in a
// collective first: the ranks can end together, each cleaning up (rank 0 releases what it holds),
// where an error on one rank alone must end the job with abort.
template <class Error>
struct OnEveryRank : Error {
  using Error::Error;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this node
  virtual int local_size() const = 0;

  virtual void allreduce_sum(float* data, std::size_t n) = 0;  // in place
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  // Starts an in-place sum all-reduce; it completes in wait_all(). `data` must stay untouched
  // until then.
  virtual void start_allreduce_sum(float* data, std::size_t n) = 0;
  // Lets started operations advance (MPI progresses only inside MPI calls).
  virtual void progress() = 0;
  virtual void wait_all() = 0;
  // Starts a sum reduce-scatter: rank r receives into `recv` the sum over all ranks of the
  // counts[r] elements of `send` that follow the counts of the ranks before it. Completes in
  // wait_all(); `send`, `recv` and their contents stay untouched until then.
  virtual void start_reduce_scatter_sum(const float* send, float* recv, const std::vector<std::size_t>& counts) = 0;
  // Rank r's counts[r] elements, at data + the counts of the ranks before it, to every rank's data.
  virtual void allgather_in_place(float* data, const std::vector<std::size_t>& counts) = 0;
  // The same to `root` only: its `all` receives every rank's part; every rank sends its counts[r]
  // elements from `mine` (on the root, `mine` may be its own place in `all`).
  virtual void gather(const float* mine, float* all, const std::vector<std::size_t>& counts, int root) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Every rank's `bytes` bytes at `mine`, on `root` in rank order (sizes may differ by rank);
  // empty elsewhere.
  virtual std::vector<std::vector<unsigned char>> gather_bytes(const void* mine, std::size_t bytes, int root) = 0;
  // Point to point, blocking: `bytes` bytes to rank `to`, or from rank `from` (doctor's link test).
  virtual void send(const void* data, std::size_t bytes, int to) = 0;
  virtual void receive(void* data, std::size_t bytes, int from) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job; safe to call from any rank at any time.
  [[noreturn]] virtual void abort(int exit_code) noexcept = 0;
};

// MPI_COMM_WORLD (MPI must be initialised and stay so while the Comm lives).
std::unique_ptr<Comm> make_mpi_comm();

// A world of one process without MPI, for a run that no MPI launcher started: a workstation, a
// GPU node without an MPI installation, `srun -n1` without --mpi. Every collective is the
// identity; abort ends the process.
std::unique_ptr<Comm> make_single_process_comm();

}  // namespace slurm_train
