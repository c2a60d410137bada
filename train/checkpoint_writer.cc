#include "train/checkpoint_writer.h"

#include <iostream>
#include <utility>

namespace slurm_train {

CheckpointWriter::CheckpointWriter(bool async, WriteFn write) : async_(async), write_(std::move(write)) {}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::cerr << "slurm-train: error: the checkpoint write in flight at shutdown failed: " << e.what() << "\n";
  }
}

CheckpointState& CheckpointWriter::buffer() {
  wait();
  return state_;
}

void CheckpointWriter::submit() {
  wait();
  if (!async_) {
    write_(state_);
    return;
  }
  done_ = false;
  thread_ = std::thread([this] {
    try {
      write_(state_);
    } catch (...) {
      error_ = std::current_exception();
    }
    done_ = true;
  });
}

void CheckpointWriter::check() {
  if (thread_.joinable() && done_) wait();
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace slurm_train
