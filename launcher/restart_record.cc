#include "launcher/restart_record.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace slurm_train {

RestartRecord next_start(const std::optional<RestartRecord>& previous, std::uint64_t start_step) {
  RestartRecord r;
  r.last_start_step = start_step;
  r.last_step_reached = start_step;
  if (!previous) {
    r.starts = 1;
    return r;
  }
  r.starts = previous->starts + 1;
  // The same step as the run before started from: that run saved nothing newer.
  r.restarts_without_progress = start_step <= previous->last_start_step ? previous->restarts_without_progress + 1 : 0;
  return r;
}

RestartRecord next_exec_record(const std::optional<RestartRecord>& previous, std::optional<std::uint64_t> step_reached,
                               double seconds_run) {
  const std::uint64_t minutes = seconds_run > 0 ? static_cast<std::uint64_t>(seconds_run / 60) : 0;
  const std::uint64_t key = step_reached ? *step_reached : (previous ? previous->last_start_step : 0) + minutes;
  RestartRecord r = next_start(previous, key);
  // The first run has nothing to compare with, unless it made no progress at all.
  if (!previous && key == 0) r.restarts_without_progress = 1;
  return r;
}

bool should_give_up(const RestartRecord& record, std::uint64_t max_without_progress) {
  return max_without_progress > 0 && record.restarts_without_progress > max_without_progress;
}

std::string format_restart_record(const RestartRecord& r) {
  return fmt::format(
      "# slurm-train restart record: runs started in this checkpoint folder\n"
      "starts = {}\nrestarts_without_progress = {}\nlast_start_step = {}\nlast_step_reached = {}\n",
      r.starts, r.restarts_without_progress, r.last_start_step, r.last_step_reached);
}

RestartRecord parse_restart_record(const std::string& text) {
  RestartRecord r;
  bool seen[4] = {false, false, false, false};
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find(" = ");
    const std::string key = line.substr(0, eq), value = eq == std::string::npos ? "" : line.substr(eq + 3);
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (eq == std::string::npos || value.empty() || ec != std::errc() || end != value.data() + value.size())
      throw std::invalid_argument(fmt::format("cannot read the line '{}': expected KEY = NUMBER", line));
    if (key == "starts")
      r.starts = number, seen[0] = true;
    else if (key == "restarts_without_progress")
      r.restarts_without_progress = number, seen[1] = true;
    else if (key == "last_start_step")
      r.last_start_step = number, seen[2] = true;
    else if (key == "last_step_reached")
      r.last_step_reached = number, seen[3] = true;
    else
      throw std::invalid_argument(fmt::format("unknown key '{}'", key));
  }
  if (!seen[0] || !seen[1] || !seen[2] || !seen[3])
    throw std::invalid_argument(
        "expected the keys starts, restarts_without_progress, last_start_step and last_step_reached");
  return r;
}

std::optional<RestartRecord> read_restart_record(const TrustedFolder& dir) {
  const std::optional<std::string> text = dir.read("restarts");
  if (!text) return std::nullopt;
  try {
    return parse_restart_record(*text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("the restart record '{}' is damaged: {} (delete it to start counting anew)",
                                         dir.shown("restarts"), e.what()));
  }
}

void write_restart_record(const TrustedFolder& dir, const RestartRecord& record) {
  dir.replace("restarts", format_restart_record(record));
}

}  // namespace slurm_train
