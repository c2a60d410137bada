#include "bench/telemetry_agreement.h"

#include <doctest/doctest.h>

#include <vector>

using namespace slurm_train;

namespace {

// 31 seconds at `watts`, the counter growing by `counter_watts` a second.
std::vector<TelemetryPair> steady(double watts, double counter_watts, double smi_utilization) {
  std::vector<TelemetryPair> pairs;
  for (int t = 0; t <= 30; ++t)
    pairs.push_back({double(t), 98, smi_utilization, watts, watts, 1000 + counter_watts * t});
  return pairs;
}

}  // namespace

TEST_CASE("telemetry agreement: readings that agree pass, each bound fails alone") {
  const TelemetryAgreement good = judge_telemetry(steady(650, 650, 97));
  CHECK(good.utilization_ok);
  CHECK(good.power_ok);
  CHECK(good.energy_ok);
  CHECK(good.energy_error == doctest::Approx(0).epsilon(1e-12));
  CHECK_FALSE(judge_telemetry(steady(650, 650, 80)).utilization_ok);  // 18 points off
  CHECK_FALSE(judge_telemetry(steady(650, 670, 97)).energy_ok);       // the counter 3% fast
  CHECK(judge_telemetry(steady(650, 660, 97)).energy_ok);             // 1.5%
  std::vector<TelemetryPair> low = steady(650, 650, 97);
  for (auto& p : low) p.our_power = 600;  // ours 7.7% under nvidia-smi's
  CHECK_FALSE(judge_telemetry(low).power_ok);
  CHECK(judge_telemetry(low).energy_ok);  // the counter is judged against nvidia-smi's power
}

TEST_CASE("telemetry agreement: the integral follows the power as it changes; too few pairs fail") {
  std::vector<TelemetryPair> ramp;
  double energy = 0;
  for (int t = 0; t <= 10; ++t) {
    const double w = 300 + 30 * t;
    if (t > 0) energy += 0.5 * (w + ramp.back().smi_power);
    ramp.push_back({double(t), 90, 90, w, w, energy});
  }
  CHECK(judge_telemetry(ramp).energy_error == doctest::Approx(0).epsilon(1e-12));
  const TelemetryAgreement none = judge_telemetry({});
  CHECK_FALSE(none.utilization_ok);
  CHECK_FALSE(none.power_ok);
  CHECK_FALSE(none.energy_ok);
}
