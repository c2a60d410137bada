// The Comm of a world of one process (see comm.h): nothing to exchange, nobody to wait for.
#include <unistd.h>

#include <cstring>
#include <string>

#include "train/comm/comm.h"

namespace slurm_train {

namespace {

class SingleProcessComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void start_allreduce_sum(float*, std::size_t) override {}
  void start_reduce_scatter_sum(const float* send, float* recv, const std::vector<std::size_t>& counts) override {
    check_counts(counts);
    if (send != recv) std::memmove(recv, send, counts[0] * sizeof(float));
  }
  void allgather_in_place(float*, const std::vector<std::size_t>& counts) override { check_counts(counts); }
  void gather(const float* mine, float* all, const std::vector<std::size_t>& counts, int root) override {
    check_counts(counts);
    if (root != 0) throw CommError("gather to rank " + std::to_string(root) + " in a world of one process");
    if (mine != all) std::memmove(all, mine, counts[0] * sizeof(float));
  }
  void progress() override {}
  void wait_all() override {}
  void broadcast(void*, std::size_t, int root) override {
    if (root != 0) throw CommError("broadcast from rank " + std::to_string(root) + " in a world of one process");
  }
  std::vector<std::vector<unsigned char>> gather_bytes(const void* mine, std::size_t bytes, int root) override {
    if (root != 0) throw CommError("gather to rank " + std::to_string(root) + " in a world of one process");
    const auto* p = static_cast<const unsigned char*>(mine);
    return {std::vector<unsigned char>(p, p + bytes)};
  }
  void send(const void*, std::size_t, int to) override {
    throw CommError("send to rank " + std::to_string(to) + " in a world of one process");
  }
  void receive(void*, std::size_t, int from) override {
    throw CommError("receive from rank " + std::to_string(from) + " in a world of one process");
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) noexcept override { _exit(exit_code); }

 private:
  static void check_counts(const std::vector<std::size_t>& counts) {
    if (counts.size() != 1) throw CommError(std::to_string(counts.size()) + " counts for a world of one process");
  }
};

}  // namespace

std::unique_ptr<Comm> make_single_process_comm() { return std::make_unique<SingleProcessComm>(); }

}  // namespace slurm_train
