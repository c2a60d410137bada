#include "launcher/rank_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "train/io/folder_trust.h"
#include "train/io/write_all.h"

namespace slurm_train {

std::string log_job_id(const Environment& env) {
  const std::string array = env_value(env, "SLURM_ARRAY_JOB_ID"), task = env_value(env, "SLURM_ARRAY_TASK_ID");
  if (!array.empty() && !task.empty()) return array + "_" + task;
  return env_value(env, "SLURM_JOB_ID");
}

std::string utc_timestamp_ms() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", text, ms);
}

RankLog::~RankLog() {
  if (fd_ >= 0) ::close(fd_);
}

void RankLog::open(const std::string& path, int rank) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the log folder '{}': {}", parent.string(), ec.message()));
  // The job's folder also holds its restart record; a link in place of a log is not followed.
  if (!parent.empty()) require_trusted_folder(fmt::format("the log folder '{}'", parent.string()), parent.string());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot open the rank log '{}': {}", path, std::strerror(errno)));
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  rank_ = rank;
  path_ = path;
}

void RankLog::line(std::string_view text) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return;
  const std::string stamp = utc_timestamp_ms();
  std::string out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view one = text.substr(0, nl);
    out += fmt::format("{} rank {}: {}\n", stamp, rank_, one);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  // A log that cannot be written (full disk) must not stop the training: the line is dropped.
  write_all(fd_, out);
}

}  // namespace slurm_train
