#include "launcher/gpu_telemetry.h"

#include <fmt/format.h>

#include <utility>

#include "spank/jobenv/utc_time.h"
#include "train/loop/prometheus.h"

namespace slurm_train {

namespace {

std::string event_name(const GpuEvent& e) {
  if (e.kind == GpuEvent::Kind::kDoubleBitEcc) return "a double-bit ECC error";
  return fmt::format("Xid {}", e.code);
}

}  // namespace

std::string throttle_reason_names(unsigned long long mask) {
  static const std::pair<unsigned long long, const char*> kReasons[] = {
      {0x4, "power cap"},           {0x8, "hardware slowdown"}, {0x10, "sync boost"},     {0x20, "thermal (software)"},
      {0x40, "thermal (hardware)"}, {0x80, "power brake"},      {0x100, "display clock"},
  };
  std::string out;
  for (const auto& [bit, name] : kReasons)
    if (mask & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "none" : out;
}

std::string gpu_prometheus_text(const GpuSeriesLabels& l, const std::vector<GpuSample>& gpus) {
  std::string out;
  const std::string job =
      fmt::format("job_id=\"{}\",job_name=\"{}\",rank=\"{}\",host=\"{}\"", prometheus_label_value(l.job_id),
                  prometheus_label_value(l.job_name), l.rank, prometheus_label_value(l.host));
  const auto labels = [&](const GpuSample& g) {
    return fmt::format("{},gpu=\"{}\",gpu_uuid=\"{}\"", job, g.index, prometheus_label_value(g.uuid));
  };
  // One family at a time, as the format asks: HELP and TYPE once, then each GPU's series.
  const auto family = [&](const char* name, const char* type, const char* help, auto value_of) {
    std::string series;
    for (const GpuSample& g : gpus)
      if (const std::optional<double> v = value_of(g))
        series += fmt::format("slurm_train_gpu_{}{{{}}} {}\n", name, labels(g), *v);
    if (!series.empty())
      out +=
          fmt::format("# HELP slurm_train_gpu_{} {}\n# TYPE slurm_train_gpu_{} {}\n{}", name, help, name, type, series);
  };
  const auto as_double = [](const auto& reading) -> std::optional<double> {
    if (!reading) return std::nullopt;
    return static_cast<double>(*reading);
  };
  family("utilization_percent", "gauge", "Percent of the last sample period in which a kernel ran on the GPU.",
         [&](const GpuSample& g) { return as_double(g.utilization_percent); });
  family("memory_utilization_percent", "gauge",
         "Percent of the last sample period in which the GPU's memory was read or written.",
         [&](const GpuSample& g) { return as_double(g.memory_utilization_percent); });
  family("memory_used_bytes", "gauge", "GPU memory in use, by every process.",
         [&](const GpuSample& g) { return as_double(g.memory_used_bytes); });
  family("memory_total_bytes", "gauge", "GPU memory in all.",
         [&](const GpuSample& g) { return as_double(g.memory_total_bytes); });
  family("temperature_celsius", "gauge", "GPU die temperature.",
         [&](const GpuSample& g) { return as_double(g.temperature_celsius); });
  family("power_watts", "gauge", "GPU board power draw.", [&](const GpuSample& g) { return g.power_watts; });
  family("energy_joules_total", "counter", "Energy the GPU used since its driver was loaded.",
         [&](const GpuSample& g) { return g.energy_joules; });
  family("sm_clock_hertz", "gauge", "Streaming multiprocessor clock.", [&](const GpuSample& g) {
    return g.sm_clock_mhz ? std::optional<double>(*g.sm_clock_mhz * 1e6) : std::nullopt;
  });
  family("throttle_reasons", "gauge",
         "NVML's clocks-event reasons as a bit mask (4 power cap, 8 hardware slowdown, 32 and 64 thermal, 128 power "
         "brake); 0 when the clocks are not held back.",
         [&](const GpuSample& g) { return as_double(g.throttle_reasons); });
  family("ecc_errors_corrected_total", "counter", "Corrected (single-bit) ECC errors since the driver loaded.",
         [&](const GpuSample& g) { return as_double(g.ecc_corrected); });
  family("ecc_errors_uncorrected_total", "counter", "Uncorrected (double-bit) ECC errors since the driver loaded.",
         [&](const GpuSample& g) { return as_double(g.ecc_uncorrected); });
  family("xid_events_total", "counter", "Xid errors the driver reported for the GPU while the rank watched it.",
         [&](const GpuSample& g) {
           double n = 0;
           for (const GpuEvent& e : g.events) n += e.kind == GpuEvent::Kind::kXid ? 1 : 0;
           return std::optional<double>(n);
         });
  family("last_xid", "gauge", "The newest Xid the driver reported for the GPU (absent while there is none).",
         [&](const GpuSample& g) -> std::optional<double> {
           for (auto e = g.events.rbegin(); e != g.events.rend(); ++e)
             if (e->kind == GpuEvent::Kind::kXid) return static_cast<double>(e->code);
           return std::nullopt;
         });
  return out;
}

std::string gpu_fault_summary(const std::vector<GpuSample>& gpus) {
  const GpuSample* where = nullptr;
  const GpuEvent* newest = nullptr;
  for (const GpuSample& g : gpus)
    for (const GpuEvent& e : g.events)
      if (!newest || e.unix_seconds >= newest->unix_seconds) where = &g, newest = &e;
  if (!newest) return "";
  return fmt::format("GPU {} ({}): {} at {}", where->index, where->uuid, event_name(*newest),
                     utc_iso8601(static_cast<std::int64_t>(newest->unix_seconds)));
}

std::optional<double> gpu_energy_between(const std::vector<GpuSample>& before, const std::vector<GpuSample>& after) {
  if (before.empty() || before.size() != after.size()) return std::nullopt;
  double joules = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (before[i].uuid != after[i].uuid || !before[i].energy_joules || !after[i].energy_joules) return std::nullopt;
    joules += *after[i].energy_joules - *before[i].energy_joules;
  }
  return joules;
}

}  // namespace slurm_train
