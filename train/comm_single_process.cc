// The Comm of a world of one process (see comm.h): nothing to exchange, nobody to wait for.
#include <unistd.h>

#include "train/comm.h"

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
  void progress() override {}
  void wait_all() override {}
  void broadcast(void*, std::size_t, int root) override {
    if (root != 0) throw CommError("broadcast from rank " + std::to_string(root) + " in a world of one process");
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) noexcept override { _exit(exit_code); }
};

}  // namespace

std::unique_ptr<Comm> make_single_process_comm() { return std::make_unique<SingleProcessComm>(); }

}  // namespace slurm_train
