#include "train/loop/best_keeper.h"

#include <fmt/format.h>

#include "train/checkpoint/checkpoint_store.h"

namespace slurm_train {

BestKeeper::BestKeeper(const std::string& keep_best, const std::string& dir, Comm& comm, bool rank0, std::ostream& out)
    : rank0_(rank0), out_(out) {
  if (keep_best.empty()) return;
  metric_ = parse_best_metric(keep_best);
  // {found, step, value}: a marker of another metric (the configuration changed) counts as none.
  double shared[3] = {0, 0, 0};
  if (rank0) {
    const auto marker = read_best_marker(dir, [&](const std::string& line) { out << line << "\n" << std::flush; });
    if (marker && marker->metric == metric_->name)
      shared[0] = 1, shared[1] = static_cast<double>(marker->step), shared[2] = marker->value;
  }
  comm.broadcast(shared, sizeof shared, 0);
  if (shared[0] != 0) best_ = BestRecord{static_cast<std::uint64_t>(shared[1]), metric_->name, shared[2]};
  if (rank0 && best_)
    out << fmt::format("best {} so far {:.6g}, at step {} ({}/best)\n", best_->metric, best_->value, best_->step, dir)
        << std::flush;
}

void BestKeeper::evaluated(std::uint64_t steps_done, const EvaluationFigures& figures) {
  if (!metric_) return;
  const std::optional<double> value = figures.value_of(metric_->name);
  if (!value || !is_better(*metric_, *value, best_)) return;
  best_ = due_ = BestRecord{steps_done, metric_->name, *value};
  if (rank0_)
    out_ << fmt::format("best {} so far: {:.6g} at step {}; its checkpoint is kept as 'best'\n", metric_->name, *value,
                        steps_done)
         << std::flush;
}

std::optional<BestRecord> BestKeeper::take(std::uint64_t steps_done) {
  if (!due_ || due_->step != steps_done) return std::nullopt;
  return std::exchange(due_, std::nullopt);
}

}  // namespace slurm_train
