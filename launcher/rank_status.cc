#include "launcher/rank_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace slurm_train {

namespace {

const char* state_name(RankState s) {
  switch (s) {
    case RankState::kConnecting:
      return "connecting";
    case RankState::kRunning:
      return "running";
    case RankState::kFinished:
      return "finished";
    case RankState::kLost:
      return "lost";
    case RankState::kFailed:
      return "failed";
  }
  return "?";
}

}  // namespace

std::string format_rank_list(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

HangVerdict judge_hang(const std::vector<RankStatus>& ranks, double timeout_seconds, double silent_seconds) {
  HangVerdict v;
  std::vector<const RankStatus*> stalled;
  for (const auto& r : ranks)
    if ((r.state == RankState::kRunning || r.state == RankState::kConnecting) &&
        r.seconds_since_progress >= timeout_seconds)
      stalled.push_back(&r);
  if (stalled.empty()) return v;
  // Stalled ranks that all wait in a collective, while a rank that they wait for still computes
  // within the timeout: slow, not hung. A remote rank's progress is seen through its beats, up to
  // a beat late, so a rank that stopped computing may look fresher than those waiting for it; it
  // is judged once it stalls itself.
  const auto computing = [&](const RankStatus& r) {
    return r.state == RankState::kRunning && !waits_for_peers(r.phase) && r.seconds_since_progress < timeout_seconds;
  };
  if (std::all_of(stalled.begin(), stalled.end(), [](const RankStatus* r) { return waits_for_peers(r->phase); }) &&
      std::any_of(ranks.begin(), ranks.end(), computing))
    return v;
  v.hung = true;
  const auto silent = [&](const RankStatus* r) {
    return r->state == RankState::kRunning && r->seconds_since_heard >= std::max(timeout_seconds, silent_seconds);
  };
  const bool any_silent = std::any_of(stalled.begin(), stalled.end(), silent);
  std::uint64_t lowest = std::numeric_limits<std::uint64_t>::max();
  for (const auto* r : stalled)
    if (!any_silent && !waits_for_peers(r->phase)) lowest = std::min(lowest, r->step);
  const auto to_blame = [&](const RankStatus* r) {
    return any_silent ? silent(r) : !waits_for_peers(r->phase) && r->step == lowest;
  };
  std::vector<int> waiting;
  const RankStatus* first = nullptr;
  for (const auto* r : stalled) {
    if (to_blame(r)) {
      v.stuck.push_back(r->rank);
      if (!first) first = r;
    } else {
      waiting.push_back(r->rank);
    }
  }
  // A rank that entered its collective after the stuck rank stopped has waited less than the
  // timeout, yet waits for it all the same.
  if (first)
    for (const auto& r : ranks)
      if (r.state == RankState::kRunning && waits_for_peers(r.phase) && r.seconds_since_progress < timeout_seconds)
        waiting.push_back(r.rank);
  const bool many = v.stuck.size() > 1;
  if (first && any_silent) {
    v.summary = fmt::format(
        "rank{} {} ({}{}) silent for {:.0f} s: its watchdog sends nothing (the process stopped, or its node cut "
        "off); last heard in the {} phase of step {}",
        many ? "s" : "", format_rank_list(v.stuck), first->host, many ? ", ..." : fmt::format(", pid {}", first->pid),
        first->seconds_since_heard, phase_name(first->phase), first->step);
  } else if (first) {
    v.summary =
        fmt::format("rank{} {} ({}{}) made no progress for {:.0f} s in the {} phase of step {}", many ? "s" : "",
                    format_rank_list(v.stuck), first->host, many ? ", ..." : fmt::format(", pid {}", first->pid),
                    first->seconds_since_progress, phase_name(first->phase), first->step);
  } else {
    v.summary = fmt::format(
        "every stalled rank ({}) waits in a collective for {:.0f} s or more: MPI or the network is stuck, or a "
        "rank is gone without closing its connection",
        format_rank_list(waiting), timeout_seconds);
  }
  if (first && !waiting.empty()) v.summary += fmt::format("; rank(s) {} wait for it", format_rank_list(waiting));
  return v;
}

std::string format_status_table(const std::vector<RankStatus>& ranks) {
  std::string out = fmt::format("{:>5}  {:<20} {:>8}  {:<10} {:>8}  {:<24} {:>8}\n", "rank", "host", "pid", "state",
                                "step", "phase", "idle s");
  for (const auto& r : ranks)
    out += fmt::format("{:>5}  {:<20} {:>8}  {:<10} {:>8}  {:<24} {:>8.1f}\n", r.rank, r.host.empty() ? "?" : r.host,
                       r.pid, state_name(r.state), r.step, phase_name(r.phase), r.seconds_since_progress);
  return out;
}

}  // namespace slurm_train
