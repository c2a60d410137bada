#include "train/data/prefetcher.h"

#include <stdexcept>

namespace slurm_train {

BatchPrefetcher::BatchPrefetcher(const Samples& data, std::uint64_t seed, std::size_t global_batch, int rank, int world,
                                 std::uint64_t first_step, std::uint64_t end_step)
    : data_(data),
      seed_(seed),
      global_batch_(global_batch),
      rows_(rank_rows(global_batch, rank, world)),
      first_step_(first_step),
      end_step_(end_step),
      thread_([this] { produce(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

Batch BatchPrefetcher::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  changed_.notify_all();
  return batch;
}

void BatchPrefetcher::produce() {
  try {
    const std::size_t per_epoch = batches_per_epoch(data_.count(), global_batch_);
    if (per_epoch == 0) throw std::invalid_argument("the global batch is larger than the training set");
    std::uint64_t epoch = ~std::uint64_t{0};
    std::vector<std::uint32_t> perm;
    for (std::uint64_t step = first_step_; step < end_step_; ++step) {
      if (step / per_epoch != epoch) {
        epoch = step / per_epoch;
        perm = epoch_permutation(seed_, epoch, data_.count());
      }
      Batch b;
      b.step = step;
      b.first_row = step * global_batch_ + rows_.begin;
      const std::size_t offset = (step % per_epoch) * global_batch_ + rows_.begin;
      data_.gather(perm.data() + offset, rows_.size(), b);
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return ready_.size() < kDepth || stop_; });
      if (stop_) return;
      ready_.push_back(std::move(b));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

}  // namespace slurm_train
