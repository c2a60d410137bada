// Writes checkpoints on a background thread so that training goes on meanwhile. The training
// thread fills the host copy (buffer()), then submit()s it; one write is in flight at most, so a
// new submit first waits for the previous write (that wait is part of the stall it reports).
// A write's error is kept and rethrown on the training thread by the next check(), submit() or
// wait(): never lost, never thrown across threads. Synchronous mode writes inside submit().
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <thread>

#include "train/checkpoint_state.h"

namespace slurm_train {

class CheckpointWriter {
 public:
  using WriteFn = std::function<void(const CheckpointState&)>;
  CheckpointWriter(bool async, WriteFn write);
  // Waits for the write in flight; an error then is reported on stderr (a destructor may not
  // throw, and the caller is already unwinding from another error or skipped wait()).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The host copy to fill before submit(); waits for the write in flight first (rethrowing its
  // error), since that write reads it. Returns it with its capacity kept from the last save.
  CheckpointState& buffer();
  // Writes buffer() (in the background when async).
  void submit();
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
  std::atomic<bool> done_{false};
  std::exception_ptr error_;  // written by the writer thread before done_, read after join
};

}  // namespace slurm_train
