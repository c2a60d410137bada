// The best checkpoint by an evaluation metric (ckpt.keep_best): which metric and which way is
// better, whether an evaluation beats the best so far, and the "best" marker of a checkpoint
// folder that names it. Pure: checkpoint_store.h commits and reads the marker.
//
// The marker is the file DIR/best, two lines:
//   step-00000480.h5
//   test_loss 0.5589123456789012
// committed like DIR/latest (temporary file, fsync, rename, fsync of the folder) once the named
// checkpoint is committed, so that it always names a complete file, which the keep policy never
// removes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slurm_train {

// What ckpt.keep_best says: "test_loss", "test_accuracy" or "train_loss" (the epoch's mean;
// "val_loss" and "val_accuracy" name the test figures as a language model's lines call them),
// lower better for a loss and higher for an accuracy, or either with ":min" or ":max".
struct BestMetric {
  std::string name;
  bool lower_is_better = true;
};

// Throws std::invalid_argument naming the value and what was expected.
BestMetric parse_best_metric(std::string_view text);

// The figures an evaluation gives, by metric name (nullopt for a name it does not give).
struct EvaluationFigures {
  double test_loss = 0, test_accuracy = 0, train_loss = 0;
  std::optional<double> value_of(const std::string& name) const;
};

struct BestRecord {
  std::uint64_t step = 0;
  std::string metric;
  double value = 0;
};

// Whether `value` beats `best` (none yet: any finite value does). A value that is not finite
// never does; a tie keeps the earlier.
bool is_better(const BestMetric& metric, double value, const std::optional<BestRecord>& best);

// The marker's text, and back. parse throws std::invalid_argument saying what is wrong.
std::string format_best_marker(const BestRecord& record);
BestRecord parse_best_marker(std::string_view text);

}  // namespace slurm_train
