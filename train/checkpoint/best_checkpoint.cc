#include "train/checkpoint/best_checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <stdexcept>

#include "train/checkpoint/checkpoint_policy.h"

namespace slurm_train {

BestMetric parse_best_metric(std::string_view text) {
  std::string_view name = text, way;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    way = text.substr(colon + 1);
  }
  BestMetric m{std::string(name), true};
  if (name == "test_accuracy" || name == "val_accuracy")
    m.lower_is_better = false;
  else if (name != "test_loss" && name != "val_loss" && name != "train_loss")
    throw std::invalid_argument(fmt::format(
        "ckpt.keep_best = '{}': expected test_loss, test_accuracy or train_loss (val_loss, val_accuracy: the same "
        "for a language model), optionally with :min or :max",
        text));
  if (way == "min")
    m.lower_is_better = true;
  else if (way == "max")
    m.lower_is_better = false;
  else if (!way.empty() || text.back() == ':')
    throw std::invalid_argument(
        fmt::format("ckpt.keep_best = '{}': expected :min or :max after the metric's name", text));
  return m;
}

std::optional<double> EvaluationFigures::value_of(const std::string& name) const {
  if (name == "test_loss" || name == "val_loss") return test_loss;
  if (name == "test_accuracy" || name == "val_accuracy") return test_accuracy;
  if (name == "train_loss") return train_loss;
  return std::nullopt;
}

bool is_better(const BestMetric& metric, double value, const std::optional<BestRecord>& best) {
  if (!std::isfinite(value)) return false;
  if (!best || best->metric != metric.name || !std::isfinite(best->value)) return true;
  return metric.lower_is_better ? value < best->value : value > best->value;
}

std::string format_best_marker(const BestRecord& record) {
  return fmt::format("{}\n{} {}\n", checkpoint_file_name(record.step), record.metric, record.value);
}

BestRecord parse_best_marker(std::string_view text) {
  auto bad = [&](const char* why) {
    return std::invalid_argument(fmt::format("the best marker is not 'step-NNNNNNNN.h5' then 'METRIC VALUE': {}", why));
  };
  const auto newline = text.find('\n');
  if (newline == std::string_view::npos) throw bad("one line only");
  const auto step = checkpoint_step_of(std::string(text.substr(0, newline)));
  if (!step) throw bad("its first line names no checkpoint");
  std::string_view rest = text.substr(newline + 1);
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) throw bad("no metric and value on its second line");
  BestRecord r{*step, std::string(rest.substr(0, space)), 0};
  const std::string_view number = rest.substr(space + 1);
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), r.value);
  if (ec != std::errc() || end != number.data() + number.size()) throw bad("its value is not a number");
  return r;
}

}  // namespace slurm_train
