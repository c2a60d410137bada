#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace slurm_train::kernels {

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_pieces() {
  for (std::size_t i = next_.fetch_add(1, std::memory_order_relaxed); i < tasks_;
       i = next_.fetch_add(1, std::memory_order_relaxed))
    fn_(context_, i);
}

void ThreadPool::worker_loop() {
  std::uint32_t seen = 0;
  for (;;) {
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    if (slots_.fetch_sub(1, std::memory_order_acq_rel) <= 0) continue;  // not needed this time
    run_pieces();
    joined_.fetch_add(1, std::memory_order_release);
    joined_.notify_one();
  }
}

void ThreadPool::run(int threads, std::size_t tasks, PieceFn fn, void* context) {
  const int helpers = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)) - 1, tasks > 0 ? tasks - 1 : 0));
  if (helpers == 0) {
    for (std::size_t i = 0; i < tasks; ++i) fn(context, i);
    return;
  }
  while (static_cast<int>(workers_.size()) < helpers) workers_.emplace_back([this] { worker_loop(); });
  tasks_ = tasks;
  fn_ = fn;
  context_ = context;
  next_.store(0, std::memory_order_relaxed);
  joined_.store(0, std::memory_order_relaxed);
  slots_.store(helpers, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_pieces();
  for (int j = joined_.load(std::memory_order_acquire); j != helpers; j = joined_.load(std::memory_order_acquire))
    joined_.wait(j, std::memory_order_acquire);
}

}  // namespace slurm_train::kernels
