// Writes checkpoints on a background thread so that training goes on meanwhile. One write is in
// flight at most: a new submit() first waits for the previous one (that wait is part of the
// stall the trainer logs).
//
// The copy to host memory runs on the writer thread too, overlapped with the next step's data,
// forward and backward, which only read the parameters: the training thread calls
// wait_copied() before it next changes them (the optimizer update). So a save costs the loop
// about nothing unless the previous write is still going or the copy outlasts forward+backward.
//
// A write's (or copy's) error is kept and rethrown on the training thread by the next check(),
// wait_copied(), submit() or wait(): never lost, never thrown across threads. Synchronous mode
// copies and writes inside submit().
//
// HDF5's MPI build is not thread-safe: while a write is in flight the training thread makes no
// HDF5 call (it reads its data before the loop, and every way out of the loop waits for the
// writer first), and h5::BackgroundUse refuses a file it would open meanwhile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "train/checkpoint/checkpoint_state.h"

namespace slurm_train {

class CheckpointWriter {
 public:
  using WriteFn = std::function<void(const CheckpointState&)>;
  // Fills the host copy; its buffers keep their capacity from the last save.
  using FillFn = std::function<void(CheckpointState&)>;
  CheckpointWriter(bool async, WriteFn write);
  // Waits for the write in flight; an error then is reported on stderr (a destructor may not
  // throw, and the caller is already unwinding from another error or skipped wait()).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write (rethrowing its error), then fills and writes a checkpoint.
  void submit(FillFn fill);
  // Blocks until the submitted copy has been taken; rethrows its error.
  void wait_copied();
  // Rethrows the error of a finished write, without waiting for one in flight.
  void check();
  // Waits for the write in flight and rethrows its error.
  void wait();
  bool busy() const { return thread_.joinable(); }

 private:
  const bool async_;
  WriteFn write_;
  CheckpointState state_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable copied_changed_;
  bool copied_ = true;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;  // written by the writer thread before done_, read after join
};

}  // namespace slurm_train
