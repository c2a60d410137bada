// NCCL behind Comm (see comm_nccl.h). Compiled only into CUDA builds.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "train/comm/comm_nccl.h"

#include <nccl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <thread>
#include <vector>

#include "spank/jobenv/host.h"

namespace slurm_train {
namespace {

class NcclComm final : public Comm {
 public:
  NcclComm(Comm& bootstrap, const NcclOptions& o) : boot_(bootstrap), options_(o), compute_(o.compute) {
    check_cuda(cudaSetDevice(o.device), "cudaSetDevice", __LINE__);
    ncclUniqueId id{};
    if (boot_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", __LINE__);
    boot_.broadcast(&id, sizeof id, 0);
    check_nccl(ncclCommInitRank(&comm_, boot_.size(), id, boot_.rank()), "ncclCommInitRank", __LINE__);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", __LINE__);
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags", __LINE__);
  }
  ~NcclComm() override {
    // Outstanding work first: destroying a communicator with collectives in flight is undefined.
    if (stream_) cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : ready_) cudaEventDestroy(e);
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return boot_.rank(); }
  int size() const override { return boot_.size(); }
  int local_rank() const override { return boot_.local_rank(); }
  int local_size() const override { return boot_.local_size(); }

  void allreduce_sum(float* data, std::size_t n) override {
    enqueue_after_compute();
    check_nccl(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce", __LINE__);
    wait_all();
  }
  void allreduce_sum(double* data, std::size_t n) override {
    enqueue_after_compute();
    check_nccl(ncclAllReduce(data, data, n, ncclDouble, ncclSum, comm_, stream_), "ncclAllReduce", __LINE__);
    wait_all();
  }
  void start_allreduce_sum(float* data, std::size_t n) override {
    enqueue_after_compute();
    check_nccl(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce", __LINE__);
  }
  // The sharded optimizer's collectives, whose parts differ by rank (a bucket may fall in one
  // shard): NCCL's reduce-scatter and all-gather take equal parts, so each is a group of one
  // reduce (or broadcast) per rank with a part, rooted at that rank, as PyTorch's NCCL backend
  // does for uneven sizes. Every rank issues the same sequence: the counts are the same everywhere.
  void start_reduce_scatter_sum(const float* send, float* recv, const std::vector<std::size_t>& counts) override {
    check_counts(counts, "reduce-scatter");
    enqueue_after_compute();
    check_nccl(ncclGroupStart(), "ncclGroupStart", __LINE__);
    std::size_t at = 0;
    for (int r = 0; r < size(); ++r) {
      const std::size_t count = counts[static_cast<std::size_t>(r)];
      // recvbuff is read on the root only.
      if (count > 0)
        check_nccl(ncclReduce(send + at, recv, count, ncclFloat, ncclSum, r, comm_, stream_), "ncclReduce", __LINE__);
      at += count;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", __LINE__);
  }
  void allgather_in_place(float* data, const std::vector<std::size_t>& counts) override {
    check_counts(counts, "all-gather");
    enqueue_after_compute();
    check_nccl(ncclGroupStart(), "ncclGroupStart", __LINE__);
    std::size_t at = 0;
    for (int r = 0; r < size(); ++r) {
      const std::size_t count = counts[static_cast<std::size_t>(r)];
      if (count > 0)
        check_nccl(ncclBroadcast(data + at, data + at, count, ncclFloat, r, comm_, stream_), "ncclBroadcast", __LINE__);
      at += count;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", __LINE__);
    wait_all();
  }
  void gather(const float* mine, float* all, const std::vector<std::size_t>& counts, int root) override {
    check_counts(counts, "gather");
    enqueue_after_compute();
    const int me = rank();
    std::size_t at = 0;
    check_nccl(ncclGroupStart(), "ncclGroupStart", __LINE__);
    for (int r = 0; r < size(); ++r) {
      const std::size_t count = counts[static_cast<std::size_t>(r)];
      if (count > 0 && r != root && me == r)
        check_nccl(ncclSend(mine, count, ncclFloat, root, comm_, stream_), "ncclSend", __LINE__);
      if (count > 0 && r != root && me == root)
        check_nccl(ncclRecv(all + at, count, ncclFloat, r, comm_, stream_), "ncclRecv", __LINE__);
      at += count;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", __LINE__);
    if (me == root) {
      // The root's own part: a copy unless it is already in place.
      std::size_t own = 0;
      for (int r = 0; r < root; ++r) own += counts[static_cast<std::size_t>(r)];
      const std::size_t count = counts[static_cast<std::size_t>(root)];
      if (count > 0 && mine != all + own)
        check_cuda(cudaMemcpyAsync(all + own, mine, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync", __LINE__);
    }
    wait_all();
  }
  // NCCL progresses on its own; this only notices a failed peer early.
  void progress() override { poll_async_error(); }
  void wait_all() override {
    check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord", __LINE__);
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    for (;;) {
      const cudaError_t rc = cudaEventQuery(done_);
      if (rc == cudaSuccess) break;
      if (rc != cudaErrorNotReady) check_cuda(rc, "cudaEventQuery", __LINE__);
      poll_async_error();
      if (std::chrono::steady_clock::now() > deadline)
        fail(fmt::format("NCCL collectives did not complete within {} s (a peer hung or died); communicator aborted",
                         options_.timeout.count()));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // The compute stream continues only after the reductions (a no-op now, kept for order).
    check_cuda(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent", __LINE__);
    next_ready_ = 0;
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    enqueue_after_compute();
    check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast", __LINE__);
    wait_all();
  }
  // Device memory, as every other collective here.
  void send(const void* data, std::size_t bytes, int to) override {
    enqueue_after_compute();
    check_nccl(ncclSend(data, bytes, ncclUint8, to, comm_, stream_), "ncclSend", __LINE__);
    wait_all();
  }
  void receive(void* data, std::size_t bytes, int from) override {
    enqueue_after_compute();
    check_nccl(ncclRecv(data, bytes, ncclUint8, from, comm_, stream_), "ncclRecv", __LINE__);
    wait_all();
  }
  // Host memory and files: the bootstrap's (MPI).
  std::vector<std::vector<unsigned char>> gather_bytes(const void* mine, std::size_t bytes, int root) override {
    return boot_.gather_bytes(mine, bytes, root);
  }
  void barrier() override { boot_.barrier(); }
  [[noreturn]] void abort(int exit_code) noexcept override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    boot_.abort(exit_code);
    _exit(exit_code);  // not reached: the bootstrap's abort does not return
  }

 private:
  void check_counts(const std::vector<std::size_t>& counts, const char* what) const {
    if (counts.size() != static_cast<std::size_t>(size()))
      throw CommError(fmt::format("NCCL {}: {} counts for {} ranks", what, counts.size(), size()));
  }
  // The next collective waits for what the compute stream has queued so far. One event per
  // collective between two wait_all() calls (events are reused afterwards).
  void enqueue_after_compute() {
    if (next_ready_ == ready_.size()) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", __LINE__);
      ready_.push_back(e);
    }
    cudaEvent_t e = ready_[next_ready_++];
    check_cuda(cudaEventRecord(e, compute_), "cudaEventRecord", __LINE__);
    check_cuda(cudaStreamWaitEvent(stream_, e, 0), "cudaStreamWaitEvent", __LINE__);
  }

  void poll_async_error() {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", __LINE__);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(fmt::format("NCCL reported an asynchronous error: {}: {}", ncclGetErrorString(async),
                       ncclGetLastError(comm_)));
  }

  void check_nccl(ncclResult_t rc, const char* call, int line) {
    if (rc == ncclSuccess) return;
    fail(fmt::format("NCCL call {} failed at {}:{}: {}: {}", call, __FILE__, line, ncclGetErrorString(rc),
                     ncclGetLastError(comm_)));
  }
  void check_cuda(cudaError_t rc, const char* call, int line) {
    if (rc == cudaSuccess) return;
    fail(fmt::format("CUDA call {} failed at {}:{}: {}: {}", call, __FILE__, line, cudaGetErrorName(rc),
                     cudaGetErrorString(rc)));
  }
  // Aborting the communicator first releases this rank's kernels that wait on a dead peer; the
  // launcher's handler then ends every rank.
  [[noreturn]] void fail(const std::string& what) {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw CommError(fmt::format("rank {} on {} (GPU {}): {}", boot_.rank(), host_name(), options_.device, what));
  }

  Comm& boot_;
  NcclOptions options_;
  cudaStream_t compute_ = nullptr, stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  std::vector<cudaEvent_t> ready_;
  std::size_t next_ready_ = 0;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, const NcclOptions& options) {
  return std::make_unique<NcclComm>(bootstrap, options);
}

}  // namespace slurm_train
#endif  // SLURM_TRAIN_WITH_CUDA
