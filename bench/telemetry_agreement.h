// gpu_check telemetry's verdicts: slurm-train's GPU samples (launcher/gpu_sampler.h) against
// nvidia-smi's, taken side by side once a second on a loaded GPU. Pure, header-only: the unit
// tests check the arithmetic without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace slurm_train {

// One moment: ours and nvidia-smi's readings of the same GPU.
struct TelemetryPair {
  double seconds = 0;                               // since the first pair
  double our_utilization = 0, smi_utilization = 0;  // percent
  double our_power = 0, smi_power = 0;              // W
  double our_energy = 0;                            // J, the driver's counter as we read it
};

struct TelemetryAgreement {
  double utilization_within_10 = 0;  // share of the pairs whose utilisations differ by 10 points or less
  double power_error = 0;            // |mean ours - mean smi| / mean smi
  double energy_error = 0;           // |counter's increase - nvidia-smi's power integrated| / the integral
  bool utilization_ok = false, power_ok = false, energy_ok = false;
};

// Utilisation: 9 of 10 pairs within 10 points (the two read the same counter a moment apart);
// power: the means within 5%; energy: the counter's increase within 2% of nvidia-smi's power
// integrated over the same time (trapezoids).
inline TelemetryAgreement judge_telemetry(const std::vector<TelemetryPair>& pairs) {
  TelemetryAgreement a;
  if (pairs.size() < 2) return a;
  std::size_t close = 0;
  double ours = 0, smi = 0, integral = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    close += std::abs(pairs[i].our_utilization - pairs[i].smi_utilization) <= 10 ? 1 : 0;
    ours += pairs[i].our_power;
    smi += pairs[i].smi_power;
    if (i > 0)
      integral += 0.5 * (pairs[i].smi_power + pairs[i - 1].smi_power) * (pairs[i].seconds - pairs[i - 1].seconds);
  }
  const auto n = static_cast<double>(pairs.size());
  a.utilization_within_10 = static_cast<double>(close) / n;
  a.power_error = smi > 0 ? std::abs(ours - smi) / smi : 1;
  const double counted = pairs.back().our_energy - pairs.front().our_energy;
  a.energy_error = integral > 0 ? std::abs(counted - integral) / integral : 1;
  a.utilization_ok = a.utilization_within_10 >= 0.9;
  a.power_ok = a.power_error <= 0.05;
  a.energy_ok = a.energy_error <= 0.02;
  return a;
}

}  // namespace slurm_train
