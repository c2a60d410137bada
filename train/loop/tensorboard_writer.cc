#include "train/loop/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "spank/jobenv/host.h"
#include "train/io/trusted_folder.h"
#include "train/io/write_all.h"
#include "train/loop/tensorboard_record.h"

namespace slurm_train {

namespace {

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
  throw std::runtime_error(fmt::format("tensorboard: {} '{}': {}", what, path, std::strerror(err)));
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TensorboardWriter::TensorboardWriter(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("the tensorboard folder is empty");
  const TrustedFolder folder("the tensorboard folder", dir, true);
  const double now = unix_seconds_now();
  const std::string stem =
      fmt::format("events.out.tfevents.{}.{}.{}.", static_cast<long long>(now), host_name(), ::getpid());
  // Never into another writer's file (O_EXCL); a link at the name is not followed either.
  std::string name;
  for (int n = 0; fd_ < 0; ++n) {
    name = stem + std::to_string(n);
    try {
      fd_ = folder.create_exclusive(name);
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::file_exists || n == 999)
        throw std::runtime_error("tensorboard: " + std::string(e.what()));
    }
  }
  path_ = folder.shown(name);
  held_ = tensorboard_file_version_record(now);
  try {
    flush();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    try {
      folder.remove(name);  // a failed constructor leaves no file behind
    } catch (const std::runtime_error&) {
      // The write's error is the one to report.
    }
    throw;
  }
}

TensorboardWriter::~TensorboardWriter() {
  try {
    close();
  } catch (...) {
  }
}

void TensorboardWriter::require_open() const {
  if (fd_ < 0) throw std::logic_error(fmt::format("tensorboard: '{}' is closed", path_));
}

void TensorboardWriter::scalars(std::int64_t step, std::span<const std::pair<std::string, float>> values) {
  require_open();
  held_ += tensorboard_scalars_record(unix_seconds_now(), step, values);
}

void TensorboardWriter::histogram(std::int64_t step, const std::string& tag, std::span<const float> values) {
  require_open();
  held_ += tensorboard_histogram_record(unix_seconds_now(), step, tag, values);
}

void TensorboardWriter::session_start(std::int64_t step) {
  require_open();
  held_ += tensorboard_session_start_record(unix_seconds_now(), step);
}

void TensorboardWriter::flush() {
  require_open();
  const std::size_t done = write_all(fd_, held_);
  if (done < held_.size()) {
    const int err = errno;
    held_.erase(0, done);
    fail("cannot write", path_, err);
  }
  held_.clear();
}

void TensorboardWriter::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  try {
    flush();
  } catch (...) {
    ::close(fd);
    fd_ = -1;
    throw;
  }
  fd_ = -1;
  const int synced = ::fsync(fd);
  const int sync_error = errno;
  if (::close(fd) != 0 && synced == 0) fail("cannot close", path_, errno);
  if (synced != 0) fail("cannot fsync", path_, sync_error);
}

}  // namespace slurm_train
