#include "launcher/job_energy.h"

namespace slurm_train {

std::optional<RunEnergy> job_energy(std::span<const RankEnergy> ranks, std::uint64_t steps, double units_per_step,
                                    const std::string& unit) {
  RunEnergy e;
  e.steps = steps;
  bool counted = false;
  for (const RankEnergy& r : ranks) {
    if (!r.has_gpu) continue;
    if (!r.joules || r.steps == 0) return std::nullopt;
    e.joules += *r.joules;
    e.per_step += *r.joules / static_cast<double>(r.steps);
    counted = true;
  }
  if (!counted || steps == 0) return std::nullopt;
  if (units_per_step > 0) {
    e.per_unit = e.per_step / units_per_step;
    e.unit = unit;
  }
  return e;
}

}  // namespace slurm_train
