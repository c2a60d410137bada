// The watchdog's view of every rank, and its verdict: which rank is stuck, in which phase, while
// which others wait for it. Pure, so that it is tested without sockets or MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/loop/train_phase.h"

namespace slurm_train {

enum class RankState { kConnecting, kRunning, kFinished, kLost, kFailed };

struct RankStatus {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string cpus, device;
  RankState state = RankState::kConnecting;
  std::uint64_t step = 0;  // steps done when it last reported
  TrainPhase phase = TrainPhase::kStartup;
  double seconds_since_progress = 0;
  double seconds_since_heard = 0;  // since its watchdog's last frame (rank 0: always 0)
  int exit_code = 0;               // what the rank said when it finished
  std::string gpu_fault;           // the newest Xid or ECC error on its GPUs it reported (gpu_telemetry.h)
};

struct HangVerdict {
  bool hung = false;
  std::vector<int> stuck;  // the ranks to blame (empty when every rank waits in a collective)
  std::string summary;     // one sentence for the error line
};

// Hung when a running rank made no progress for `timeout_seconds`. The ranks to blame: first the
// stalled ones silent for `silent_seconds` (their watchdog, which beats on a thread of its own,
// sends nothing: the process is stopped, or its node cut off; what they last said is stale);
// else the stalled ones not waiting in a collective, at the lowest step. If every stalled rank
// waits in a collective, the summary says so (MPI or the network is stuck).
HangVerdict judge_hang(const std::vector<RankStatus>& ranks, double timeout_seconds, double silent_seconds);

// One line per rank: rank, host, pid, state, step, phase, seconds since progress.
std::string format_status_table(const std::vector<RankStatus>& ranks);

// "0-2,5" style list of ranks.
std::string format_rank_list(const std::vector<int>& ranks);

}  // namespace slurm_train
