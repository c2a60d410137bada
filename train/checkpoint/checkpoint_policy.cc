#include "train/checkpoint/checkpoint_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace slurm_train {

std::string checkpoint_file_name(std::uint64_t step) { return fmt::format("step-{:08}.h5", step); }

std::optional<std::uint64_t> checkpoint_step_of(const std::string& name) {
  constexpr std::string_view prefix = "step-", suffix = ".h5";
  if (name.size() < prefix.size() + 8 + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size() - suffix.size();
  if (!std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  std::uint64_t step = 0;
  auto [ptr, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return step;
}

bool checkpoint_due(std::uint64_t steps_done, std::uint64_t every, std::uint64_t total_steps) {
  if (steps_done == 0) return false;
  return steps_done == total_steps || (every > 0 && steps_done % every == 0);
}

std::vector<std::uint64_t> checkpoints_to_remove(std::vector<std::uint64_t> steps, std::uint64_t keep,
                                                 std::uint64_t keep_every) {
  std::sort(steps.begin(), steps.end(), std::greater<>());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<std::uint64_t> remove;
  if (keep == 0) return remove;
  for (std::size_t i = keep; i < steps.size(); ++i)
    if (keep_every == 0 || steps[i] % keep_every != 0) remove.push_back(steps[i]);
  return remove;
}

std::optional<std::uint64_t> choose_newest_valid(std::vector<std::uint64_t> steps,
                                                 const std::function<std::string(std::uint64_t)>& try_load,
                                                 const std::function<void(const std::string&)>& warn) {
  std::sort(steps.begin(), steps.end(), std::greater<>());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string refused = try_load(steps[i]);
    if (refused.empty()) return steps[i];
    warn(fmt::format("{} is unusable: {}; {}", checkpoint_file_name(steps[i]), refused,
                     i + 1 < steps.size() ? fmt::format("falling back to {}", checkpoint_file_name(steps[i + 1]))
                                          : std::string("no older checkpoint is left")));
  }
  return std::nullopt;
}

}  // namespace slurm_train
