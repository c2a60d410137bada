// A Comm of one rank for tests that need one without MPI: its collectives are the identity.
#pragma once

#include <cstdlib>

#include "train/comm.h"

namespace slurm_train::testing {

class OneRankComm final : public Comm {
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
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) noexcept override { std::_Exit(exit_code); }
};

}  // namespace slurm_train::testing
