// Assembles this rank's slice of each global batch on a background thread, one step ahead of
// training, so that gathering (and normalising) rows never stalls a step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "train/data/batches.h"
#include "train/data/samples.h"

namespace slurm_train {

class BatchPrefetcher {
 public:
  // Produces the batches of steps [first_step, end_step) for `rank` of `world`.
  BatchPrefetcher(const Samples& data, std::uint64_t seed, std::size_t global_batch, int rank, int world,
                  std::uint64_t first_step, std::uint64_t end_step);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch in step order; blocks until it is ready; rethrows the producer's error.
  Batch next();

 private:
  void produce();

  const Samples& data_;
  const std::uint64_t seed_;
  const std::size_t global_batch_;
  const RowRange rows_;
  const std::uint64_t first_step_, end_step_;
  static constexpr std::size_t kDepth = 2;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace slurm_train
