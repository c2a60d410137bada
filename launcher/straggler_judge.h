// Which ranks are stragglers, pure: each rank's compute time per step (the step without its
// waits in collectives, which a slow rank's peers spend waiting for it) is averaged over windows
// of a few seconds; a rank whose mean stays above `threshold` times the ranks' median for
// `windows` windows in a row is named, once (again only after it has recovered). The median of
// an even count is the lower middle value: with two ranks, the slow one is measured against the
// healthy one, not against their average.
#pragma once

#include <cstdint>
#include <vector>

namespace slurm_train {

struct StragglerFinding {
  int rank = 0;
  double slowdown = 0;         // its mean over the median, in the window that named it
  double compute_seconds = 0;  // its mean compute time per step then
  double median_seconds = 0;   // the ranks' median then
};

class StragglerJudge {
 public:
  StragglerJudge(int ranks, double threshold, int windows);

  // A rank's mean compute time per step over `steps` steps of the current window.
  void add(int rank, double seconds_per_step, std::uint64_t steps = 1);
  // Ends the window: the ranks named now. Ranks without a step in it are left out of the median
  // and keep their count (a stalled rank is the hang detector's).
  std::vector<StragglerFinding> close_window();
  // The last closed window's slowdown of `rank` (0: no step in it).
  double slowdown(int rank) const { return last_[static_cast<std::size_t>(rank)]; }

 private:
  double threshold_;
  int windows_;
  std::vector<double> sum_, last_;
  std::vector<std::uint64_t> steps_;
  std::vector<int> above_;   // windows in a row above the threshold
  std::vector<bool> named_;  // named, and not recovered since
};

}  // namespace slurm_train
