#include "train/checkpoint/checkpoint_writer.h"

#include <iostream>
#include <utility>

#include "train/checkpoint/write_in_flight.h"
#include "train/io/h5.h"

namespace slurm_train {

CheckpointWriter::CheckpointWriter(bool async, WriteFn write) : async_(async), write_(std::move(write)) {}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::cerr << "slurm-train: error: the checkpoint write in flight at shutdown failed: " << e.what() << "\n";
  }
}

void CheckpointWriter::submit(FillFn fill) {
  wait();
  if (!async_) {
    fill(state_);
    write_(state_);
    return;
  }
  done_ = false;
  {
    std::lock_guard lock(mutex_);
    copied_ = false;
  }
  write_in_flight_began();
  thread_ = std::thread([this, fill = std::move(fill)] {
    auto mark_copied = [this] {
      std::lock_guard lock(mutex_);
      copied_ = true;
      copied_changed_.notify_all();
    };
    try {
      fill(state_);
      mark_copied();
      const h5::BackgroundUse hdf5;  // the write's HDF5 calls: the training thread's are refused meanwhile
      write_(state_);
    } catch (...) {
      error_ = std::current_exception();
    }
    // done_ before the (repeated) mark: a wait_copied() woken by a failed copy must see it.
    done_ = true;
    mark_copied();
    write_in_flight_ended();
  });
}

void CheckpointWriter::wait_copied() {
  {
    std::unique_lock lock(mutex_);
    copied_changed_.wait(lock, [this] { return copied_; });
  }
  check();
}

void CheckpointWriter::check() {
  if (thread_.joinable() && done_) wait();
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace slurm_train
