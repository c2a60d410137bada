// What a program under `slurm-train exec` tells its supervisor through $SLURM_TRAIN_PROGRAM_PIPE,
// one JSON object a line (the Python helper, python/slurm_train, writes them):
//   {"step": 120, "metrics": {"loss": 0.41, "test_accuracy": null}}   figures at a step
//   {"done": true}                                                    finished: never requeue
// A metric's value is a number, or null for one that is not finite (JSON has no NaN). The pipe is
// the program's, so a line is outside input: parse_program_message checks every part of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace slurm_train {

// A metric's name: 1 to 64 of [A-Za-z0-9_./-], starting with a letter or '_' (a JSON key, a
// Prometheus label value and a TensorBoard tag alike), and none of the names the metrics file
// gives its own fields ("run", "step", "time").
inline constexpr std::size_t kMaxMetricName = 64;
inline constexpr std::size_t kMaxMetricsPerLine = 64;
// A longer line is not read (the pipe's reader drops it whole, saying so once).
inline constexpr std::size_t kMaxProgramLine = 16384;

struct ProgramMetrics {
  std::uint64_t step = 0;
  std::vector<std::pair<std::string, double>> values;  // by name; NaN for null
};

struct ProgramDone {};

using ProgramMessage = std::variant<ProgramMetrics, ProgramDone>;

// "" when `name` is a valid metric name, else why not.
std::string metric_name_problem(std::string_view name);

// One line (without its newline). Throws std::invalid_argument saying what was wrong with it.
ProgramMessage parse_program_message(std::string_view line);

}  // namespace slurm_train
