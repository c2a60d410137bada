// The MPI implementation of Comm.
#include <mpi.h>
#include <unistd.h>

#include <fmt/format.h>

#include <climits>
#include <deque>
#include <vector>

#include "train/comm/comm.h"

namespace slurm_train {

namespace {

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

[[noreturn]] void mpi_fail(int rc, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw CommError(
      fmt::format("rank {} on {}: MPI call {} failed at {}:{}: {}", rank, hostname(), call, file, line, text));
}

#define MPI_CHECK(call)                                                                   \
  do {                                                                                    \
    const int mpi_check_rc_ = (call);                                                     \
    if (mpi_check_rc_ != MPI_SUCCESS) mpi_fail(mpi_check_rc_, #call, __FILE__, __LINE__); \
  } while (0)

int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw CommError(fmt::format("message of {} elements exceeds MPI's int count", n));
  return static_cast<int>(n);
}

class MpiComm final : public Comm {
 public:
  static constexpr int kPointToPointTag = 17;

  MpiComm() {
    // Errors come back as codes (MPI_CHECK turns them into exceptions) instead of aborting
    // inside MPI with no word of where.
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_));
    MPI_CHECK(MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(world_, &rank_));
    MPI_CHECK(MPI_Comm_size(world_, &size_));
    MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_));
    MPI_CHECK(MPI_Comm_rank(local_, &local_rank_));
    MPI_CHECK(MPI_Comm_size(local_, &local_size_));
  }
  ~MpiComm() override {
    MPI_Comm_free(&local_);
    MPI_Comm_free(&world_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void allreduce_sum(float* data, std::size_t n) override {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(n), MPI_FLOAT, MPI_SUM, world_));
  }
  void allreduce_sum(double* data, std::size_t n) override {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(n), MPI_DOUBLE, MPI_SUM, world_));
  }
  void start_allreduce_sum(float* data, std::size_t n) override {
    pending_.emplace_back();
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(n), MPI_FLOAT, MPI_SUM, world_, &pending_.back()));
  }
  void start_reduce_scatter_sum(const float* send, float* recv, const std::vector<std::size_t>& counts) override {
    pending_counts_.push_back(int_counts(counts));  // MPI reads them until the operation completes
    pending_.emplace_back();
    MPI_CHECK(
        MPI_Ireduce_scatter(send, recv, pending_counts_.back().data(), MPI_FLOAT, MPI_SUM, world_, &pending_.back()));
  }
  void allgather_in_place(float* data, const std::vector<std::size_t>& sizes) override {
    const std::vector<int> counts = int_counts(sizes), displs = displacements(counts);
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, counts.data(), displs.data(), MPI_FLOAT, world_));
  }
  void gather(const float* mine, float* all, const std::vector<std::size_t>& sizes, int root) override {
    const std::vector<int> counts = int_counts(sizes), displs = displacements(counts);
    const bool in_place = rank_ == root && mine == all + displs[static_cast<std::size_t>(rank_)];
    MPI_CHECK(MPI_Gatherv(in_place ? MPI_IN_PLACE : mine, counts[static_cast<std::size_t>(rank_)], MPI_FLOAT, all,
                          counts.data(), displs.data(), MPI_FLOAT, root, world_));
  }
  void progress() override {
    if (pending_.empty()) return;
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE));
  }
  void wait_all() override {
    if (pending_.empty()) return;
    MPI_CHECK(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE));
    pending_.clear();
    pending_counts_.clear();
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    MPI_CHECK(MPI_Bcast(data, checked_count(bytes), MPI_BYTE, root, world_));
  }
  std::vector<std::vector<unsigned char>> gather_bytes(const void* mine, std::size_t bytes, int root) override {
    const int n = checked_count(bytes);
    std::vector<int> sizes(static_cast<std::size_t>(rank_ == root ? size_ : 0));
    MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, world_));
    std::vector<int> displs;
    std::vector<unsigned char> all;
    if (rank_ == root) {
      displs = displacements(sizes);
      all.resize(static_cast<std::size_t>(displs.back()) + static_cast<std::size_t>(sizes.back()));
    }
    MPI_CHECK(MPI_Gatherv(mine, n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, root, world_));
    std::vector<std::vector<unsigned char>> parts(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r)
      parts[r].assign(all.begin() + displs[r], all.begin() + displs[r] + sizes[r]);
    return parts;
  }

  void send(const void* data, std::size_t bytes, int to) override {
    MPI_CHECK(MPI_Send(data, checked_count(bytes), MPI_BYTE, to, kPointToPointTag, world_));
  }
  void receive(void* data, std::size_t bytes, int from) override {
    MPI_CHECK(MPI_Recv(data, checked_count(bytes), MPI_BYTE, from, kPointToPointTag, world_, MPI_STATUS_IGNORE));
  }
  void barrier() override { MPI_CHECK(MPI_Barrier(world_)); }
  [[noreturn]] void abort(int exit_code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    _exit(exit_code);
  }

 private:
  MPI_Comm world_ = MPI_COMM_NULL, local_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  // MPI's counts are ints: a part of 2^31 floats or more is refused, naming it.
  std::vector<int> int_counts(const std::vector<std::size_t>& counts) const {
    if (counts.size() != static_cast<std::size_t>(size_))
      throw CommError(fmt::format("{} counts for a world of {} ranks", counts.size(), size_));
    std::vector<int> out(counts.size());
    for (std::size_t r = 0; r < counts.size(); ++r) out[r] = checked_count(counts[r]);
    return out;
  }
  static std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> displs(counts.size(), 0);
    long long at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      displs[r] = checked_count(static_cast<std::size_t>(at));
      at += counts[r];
    }
    return displs;
  }

  std::vector<MPI_Request> pending_;
  std::deque<std::vector<int>> pending_counts_;  // deque: a push leaves earlier arrays in place
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm() { return std::make_unique<MpiComm>(); }

}  // namespace slurm_train
