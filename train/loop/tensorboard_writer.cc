#include "train/loop/tensorboard_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "spank/jobenv/host.h"
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

// mkdir -p with mode 0755 (less the umask): std::filesystem::create_directories would use 0777.
void make_folders(const std::string& dir) {
  std::filesystem::path at;
  for (const auto& part : std::filesystem::path(dir)) {
    at /= part;
    if (::mkdir(at.c_str(), 0755) == 0) continue;
    if (errno != EEXIST) fail("cannot create the folder", at.string(), errno);
    struct stat st;
    if (::stat(at.c_str(), &st) != 0) fail("cannot stat", at.string(), errno);
    if (!S_ISDIR(st.st_mode)) fail("cannot create the folder", at.string(), ENOTDIR);
  }
}

}  // namespace

TensorboardWriter::TensorboardWriter(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("the tensorboard folder is empty");
  make_folders(dir);
  const double now = unix_seconds_now();
  const std::string stem =
      (std::filesystem::path(dir) /
       fmt::format("events.out.tfevents.{}.{}.{}.", static_cast<long long>(now), host_name(), ::getpid()))
          .string();
  // O_EXCL: never into another writer's file; a link at the name is not followed either.
  for (int n = 0; fd_ < 0; ++n) {
    path_ = stem + std::to_string(n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0 && (errno != EEXIST || n == 999)) fail("cannot create", path_, errno);
  }
  held_ = tensorboard_file_version_record(now);
  try {
    flush();
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());  // a failed constructor leaves no file behind
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
