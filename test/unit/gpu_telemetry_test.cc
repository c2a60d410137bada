#include "launcher/gpu_telemetry.h"

#include "launcher/gpu_monitor.h"

#include <doctest/doctest.h>

#include <string>

using namespace slurm_train;

namespace {

GpuSample busy_gpu(unsigned index, const std::string& uuid, double joules) {
  GpuSample g;
  g.index = index;
  g.uuid = uuid;
  g.utilization_percent = 87;
  g.memory_utilization_percent = 40;
  g.memory_used_bytes = 30ull << 30;
  g.memory_total_bytes = 80ull << 30;
  g.temperature_celsius = 61;
  g.power_watts = 412.5;
  g.energy_joules = joules;
  g.sm_clock_mhz = 1980;
  g.throttle_reasons = 0x4;
  g.ecc_corrected = 2;
  g.ecc_uncorrected = 0;
  return g;
}

}  // namespace

TEST_CASE("gpu telemetry: each reading is one series per GPU, labelled with the job, rank, host and GPU") {
  GpuSeriesLabels labels{"4242", "gpt \"small\"", 3, "node2"};
  GpuSample second = busy_gpu(1, "GPU-bbbb", 2000);
  second.events.push_back({GpuEvent::Kind::kXid, 79, 1.78e9});
  const std::string text = gpu_prometheus_text(labels, {busy_gpu(0, "GPU-aaaa", 1000), second});
  const std::string gpu0 =
      R"(job_id="4242",job_name="gpt \"small\"",rank="3",host="node2",gpu="0",gpu_uuid="GPU-aaaa")";
  const std::string gpu1 =
      R"(job_id="4242",job_name="gpt \"small\"",rank="3",host="node2",gpu="1",gpu_uuid="GPU-bbbb")";
  CHECK(text.find("slurm_train_gpu_utilization_percent{" + gpu0 + "} 87\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_utilization_percent{" + gpu1 + "} 87\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_memory_used_bytes{" + gpu0 + "} 32212254720\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_power_watts{" + gpu0 + "} 412.5\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_energy_joules_total{" + gpu1 + "} 2000\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_sm_clock_hertz{" + gpu0 + "} 1980000000\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_throttle_reasons{" + gpu0 + "} 4\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_ecc_errors_corrected_total{" + gpu0 + "} 2\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_xid_events_total{" + gpu0 + "} 0\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_xid_events_total{" + gpu1 + "} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_last_xid{" + gpu1 + "} 79\n") != std::string::npos);
  CHECK(text.find("slurm_train_gpu_last_xid{" + gpu0) == std::string::npos);
  // HELP and TYPE once a family, before its series.
  const auto type = text.find("# TYPE slurm_train_gpu_energy_joules_total counter\n");
  REQUIRE(type != std::string::npos);
  CHECK(text.find("# TYPE slurm_train_gpu_energy_joules_total", type + 1) == std::string::npos);
  CHECK(type < text.find("slurm_train_gpu_energy_joules_total{"));
}

TEST_CASE("gpu telemetry: a reading the GPU does not report has no series, not a zero") {
  GpuSample mig;
  mig.index = 0;
  mig.uuid = "GPU-cccc";
  mig.power_watts = 100;
  const std::string text = gpu_prometheus_text({}, {mig});
  CHECK(text.find("utilization_percent") == std::string::npos);
  CHECK(text.find("ecc_errors") == std::string::npos);
  CHECK(text.find("slurm_train_gpu_power_watts{") != std::string::npos);
  CHECK(gpu_prometheus_text({}, {}).empty());
}

TEST_CASE("gpu telemetry: throttle reasons in words, idle and application clocks left out") {
  CHECK(throttle_reason_names(0) == "none");
  CHECK(throttle_reason_names(0x1 | 0x2) == "none");
  CHECK(throttle_reason_names(0x4 | 0x40) == "power cap, thermal (hardware)");
  CHECK(throttle_reason_names(0x80) == "power brake");
}

TEST_CASE("gpu telemetry: the newest Xid or ECC event names its GPU, code and time") {
  GpuSample a = busy_gpu(0, "GPU-aaaa", 0), b = busy_gpu(1, "GPU-bbbb", 0);
  CHECK(gpu_fault_summary({a, b}).empty());
  a.events.push_back({GpuEvent::Kind::kXid, 13, 1796550000});
  b.events.push_back({GpuEvent::Kind::kXid, 79, 1796550012});
  CHECK(gpu_fault_summary({a, b}) == "GPU 1 (GPU-bbbb): Xid 79 at 2026-12-06T09:40:12Z");
  a.events.push_back({GpuEvent::Kind::kDoubleBitEcc, 0, 1796550020});
  CHECK(gpu_fault_summary({a, b}) == "GPU 0 (GPU-aaaa): a double-bit ECC error at 2026-12-06T09:40:20Z");
}

TEST_CASE("gpu telemetry: energy between two samples sums the GPUs' counters, or is unknown") {
  const std::vector<GpuSample> before = {busy_gpu(0, "GPU-aaaa", 1000), busy_gpu(1, "GPU-bbbb", 50)};
  const std::vector<GpuSample> after = {busy_gpu(0, "GPU-aaaa", 1600.5), busy_gpu(1, "GPU-bbbb", 250)};
  REQUIRE(gpu_energy_between(before, after));
  CHECK(*gpu_energy_between(before, after) == doctest::Approx(800.5));
  std::vector<GpuSample> no_counter = after;
  no_counter[1].energy_joules.reset();
  CHECK_FALSE(gpu_energy_between(before, no_counter));
  CHECK_FALSE(gpu_energy_between({}, {}));
  CHECK_FALSE(gpu_energy_between(before, {after[0]}));
}

TEST_CASE("gpu monitor: a rank's textfile sits beside the job's, ending in .prom for the collector") {
  CHECK(rank_prometheus_path("/var/lib/node_exporter/train.prom", 3) == "/var/lib/node_exporter/train.rank3.prom");
  CHECK(rank_prometheus_path("metrics/job", 0) == "metrics/job.rank0.prom");
  CHECK(rank_prometheus_path("", 1).empty());
}

TEST_CASE("gpu monitor: a rank's GPUs in the loop's terms: mean utilisation, summed power and energy") {
  CHECK_FALSE(gpu_reading({}));
  GpuSample a = busy_gpu(0, "GPU-aaaa", 1000), b = busy_gpu(1, "GPU-bbbb", 500);
  b.utilization_percent = 13;
  b.power_watts = 100;
  const auto r = gpu_reading({a, b});
  REQUIRE(r);
  CHECK(r->utilization_percent == doctest::Approx(50));
  CHECK(r->power_watts == doctest::Approx(512.5));
  REQUIRE(r->energy_joules);
  CHECK(*r->energy_joules == doctest::Approx(1500));
  b.energy_joules.reset();  // one GPU without a counter: the sum would be partial
  CHECK_FALSE(gpu_reading({a, b})->energy_joules);
}
