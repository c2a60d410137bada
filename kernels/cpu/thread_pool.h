// A small persistent pool that runs the CPU kernels' element-wise loops on the rank's threads
// (OpenBLAS threads only the GEMMs). A job is `tasks` numbered pieces of work; the caller runs
// pieces too, and returns when all are done. Which thread runs a piece is not fixed, so a kernel
// must make each piece's result depend on its number only: then its output is the same for any
// number of threads (the kernels' fixed chunking and fixed-order combining rely on this).
//
// Idle workers sleep in the kernel (futex), never spin: OpenBLAS's own workers spin for a while
// after each GEMM, and on a machine with as many threads as cores a spinning pool would take
// their cores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace slurm_train::kernels {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs run(context, piece) for piece in [0, tasks) on up to `threads` threads, the caller's
  // included; one job at a time (the kernels are called from one thread).
  using PieceFn = void (*)(void* context, std::size_t piece);
  void run(int threads, std::size_t tasks, PieceFn fn, void* context);

  // The same with a callable, for the kernels: parallel(threads, tasks, [&](std::size_t i) {...}).
  template <typename F>
  void parallel(int threads, std::size_t tasks, F&& f) {
    run(
        threads, tasks, [](void* c, std::size_t i) { (*static_cast<F*>(c))(i); }, &f);
  }

 private:
  void worker_loop();
  void run_pieces();

  std::vector<std::thread> workers_;
  // A job: its fields written, then slots_ stored (release) and generation_ bumped to wake the
  // workers. A worker takes part when it claims a slot (the claim acquires the job's fields);
  // the caller returns once every claimed slot has joined, so no worker touches a finished job.
  std::size_t tasks_ = 0;
  PieceFn fn_ = nullptr;
  void* context_ = nullptr;
  std::atomic<std::size_t> next_{0};  // the next piece to run
  std::atomic<int> slots_{0};         // workers still wanted in the current job (<= 0: none)
  std::atomic<int> joined_{0};        // workers done with the current job
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace slurm_train::kernels
