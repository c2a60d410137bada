// Every rank's own log, <log-dir>/<job id>/rank-<N>.log: each line with the time (UTC, ms) and
// the rank, appended (a requeued job keeps writing to the same files). Each line is one write(2)
// on an O_APPEND descriptor, so lines never interleave and nothing is lost in a buffer when the
// watchdog ends the process with _exit.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "spank/jobenv/environment.h"
#include "train/io/trusted_folder.h"

namespace slurm_train {

// The folder name of this job's logs: "<array job>_<task>" for an array task, else
// SLURM_JOB_ID; empty outside Slurm (the launcher then makes one up on rank 0).
std::string log_job_id(const Environment& env);

class RankLog {
 public:
  RankLog() = default;
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  // Opens the log's folder as a folder of the job's (train/io/trusted_folder.h), making the
  // folders that are missing, and the log through it: a log that another user made or that every
  // user can write, or a link in its place, is refused. Throws UntrustedFolder, or
  // std::runtime_error naming the path when it cannot.
  void open(const std::string& path, int rank);
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // The log's folder, held since open() (the job's other records go there); null before.
  const TrustedFolder* folder() const { return folder_ ? &*folder_ : nullptr; }
  // Thread-safe. A text with several lines gets the prefix on each.
  void line(std::string_view text);

 private:
  std::mutex mutex_;
  int fd_ = -1;
  int rank_ = 0;
  std::string path_;
  std::optional<TrustedFolder> folder_;
};

// "2026-11-30T03:56:05.123Z"
std::string utc_timestamp_ms();

}  // namespace slurm_train
