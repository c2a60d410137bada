#include "train/steps/decay_runs.h"

#include <algorithm>

namespace slurm_train {

std::vector<DecayRun> decay_runs(const std::vector<ParamTensor>& tensors) {
  std::vector<DecayRun> runs;
  for (const ParamTensor& t : tensors) {
    const bool decay = t.shape.size() >= 2;  // as gpt_decay_layout
    if (!runs.empty() && runs.back().decay == decay && runs.back().end == t.offset)
      runs.back().end = t.offset + t.size;
    else
      runs.push_back({t.offset, t.offset + t.size, decay});
  }
  return runs;
}

std::vector<DecayRun> runs_within(const std::vector<DecayRun>& runs, std::size_t begin, std::size_t end) {
  std::vector<DecayRun> within;
  for (const DecayRun& r : runs) {
    const std::size_t from = std::max(r.begin, begin), to = std::min(r.end, end);
    if (from < to) within.push_back({from, to, r.decay});
  }
  return within;
}

}  // namespace slurm_train
