#include "launcher/progress_line.h"

#include <fmt/format.h>

#include <cmath>

namespace slurm_train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<std::uint64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

void MovingMean::add(double seconds) {
  times_.push_back(seconds);
  sum_ += seconds;
  if (times_.size() > window_) {
    sum_ -= times_.front();
    times_.pop_front();
  }
}

std::string format_progress(std::uint64_t steps_done, std::uint64_t total_steps, double loss, double samples_per_second,
                            double eta_seconds, std::size_t tokens_per_sample) {
  const double percent = total_steps ? 100.0 * static_cast<double>(steps_done) / static_cast<double>(total_steps) : 0;
  const bool tokens = tokens_per_sample > 0;
  return fmt::format("step {}/{} ({:.0f}%)  loss {:.4f}  {} {:.0f}  eta {}", steps_done, total_steps, percent, loss,
                     tokens ? "tokens/s" : "samples/s",
                     tokens ? samples_per_second * static_cast<double>(tokens_per_sample) : samples_per_second,
                     format_duration(eta_seconds));
}

}  // namespace slurm_train
