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

#include "train/io/trusted_folder.h"
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
  const std::filesystem::path p(path);
  // The job's folder also holds its restart record and step reports: held for them.
  TrustedFolder folder("the log folder", p.parent_path().empty() ? "." : p.parent_path().string(), true);
  const int fd = folder.open_append(p.filename().string(), "the rank log");
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  rank_ = rank;
  path_ = path;
  folder_ = std::move(folder);
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
