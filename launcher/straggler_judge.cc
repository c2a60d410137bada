#include "launcher/straggler_judge.h"

#include <algorithm>

namespace slurm_train {

StragglerJudge::StragglerJudge(int ranks, double threshold, int windows)
    : threshold_(threshold),
      windows_(std::max(1, windows)),
      sum_(static_cast<std::size_t>(ranks), 0.0),
      last_(static_cast<std::size_t>(ranks), 0.0),
      steps_(static_cast<std::size_t>(ranks), 0),
      above_(static_cast<std::size_t>(ranks), 0),
      named_(static_cast<std::size_t>(ranks), false) {}

void StragglerJudge::add(int rank, double seconds_per_step, std::uint64_t steps) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= sum_.size() || steps == 0 || !(seconds_per_step >= 0)) return;
  sum_[static_cast<std::size_t>(rank)] += seconds_per_step * static_cast<double>(steps);
  steps_[static_cast<std::size_t>(rank)] += steps;
}

std::vector<StragglerFinding> StragglerJudge::close_window() {
  std::vector<double> means;
  for (std::size_t r = 0; r < sum_.size(); ++r)
    if (steps_[r] > 0) means.push_back(sum_[r] / static_cast<double>(steps_[r]));
  std::vector<StragglerFinding> found;
  std::fill(last_.begin(), last_.end(), 0.0);
  if (means.size() >= 2) {
    std::sort(means.begin(), means.end());
    const double median = means[(means.size() - 1) / 2];
    for (std::size_t r = 0; r < sum_.size(); ++r) {
      if (steps_[r] == 0) continue;
      const double mean = sum_[r] / static_cast<double>(steps_[r]);
      const double slowdown = median > 0 ? mean / median : 1.0;
      last_[r] = slowdown;
      if (slowdown > threshold_) {
        if (++above_[r] >= windows_ && !named_[r]) {
          named_[r] = true;
          found.push_back({static_cast<int>(r), slowdown, mean, median});
        }
      } else {
        above_[r] = 0;
        named_[r] = false;
      }
    }
  }
  std::fill(sum_.begin(), sum_.end(), 0.0);
  std::fill(steps_.begin(), steps_.end(), 0);
  return found;
}

}  // namespace slurm_train
