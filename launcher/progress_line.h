// Rank 0's progress line: step, loss, samples/s and the time left, estimated from the recent
// steps. Pure, for the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace slurm_train {

// "42 s", "3:05", "1:02:03"
std::string format_duration(double seconds);

// The mean of the last `window` values (step times, losses).
class MovingMean {
 public:
  explicit MovingMean(std::size_t window = 50) : window_(window) {}
  void add(double seconds);
  double mean() const { return times_.empty() ? 0.0 : sum_ / static_cast<double>(times_.size()); }
  bool empty() const { return times_.empty(); }

 private:
  std::size_t window_;
  std::deque<double> times_;
  double sum_ = 0;
};

// "step 1200/7035 (17%)  loss 0.4123 (the mean of recent steps)  samples/s 51234  eta 3:05"; steps_done counts from 1.
// With tokens_per_sample (a language model), the rate is in tokens/s.
std::string format_progress(std::uint64_t steps_done, std::uint64_t total_steps, double loss, double samples_per_second,
                            double eta_seconds, std::size_t tokens_per_sample = 0);

}  // namespace slurm_train
