#include "launcher/launch_position.h"

#include <charconv>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <thread>

namespace slurm_train {

namespace {

// The first of `names` that holds a whole number >= `least`.
std::optional<int> first_number(const Environment& env, std::initializer_list<const char*> names, int least) {
  for (const char* name : names) {
    const auto it = env.find(name);
    if (it == env.end()) continue;
    const std::string& text = it->second;
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size() && value >= least) return value;
  }
  return std::nullopt;
}

}  // namespace

void let_rank0_report_first(const LaunchPosition& launch) {
  if (launch.rank != 0 && launch.size > 1) std::this_thread::sleep_for(std::chrono::seconds(2));
}

LaunchPosition launch_position(const Environment& env) {
  LaunchPosition p;
  p.rank = first_number(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}, 0).value_or(0);
  p.size =
      first_number(env, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, 1).value_or(1);
  for (const char* name : kMpiLauncherVariables)
    if (env.count(name)) p.mpi_launcher = true;
  return p;
}

}  // namespace slurm_train
