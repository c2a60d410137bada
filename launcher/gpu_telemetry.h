// What one sample of a rank's GPUs holds (gpu_sampler.h reads it through NVML), and the forms it
// takes: the rank's Prometheus textfile, the name of a GPU fault in a dead rank's message, the
// throttle reasons in words. Pure: nothing here touches NVML or a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace slurm_train {

// An Xid (NVIDIA's driver error code, e.g. 79: the GPU fell off the bus) or a double-bit ECC
// error reported on the GPU.
struct GpuEvent {
  enum class Kind { kXid, kDoubleBitEcc } kind = Kind::kXid;
  unsigned long long code = 0;  // the Xid
  double unix_seconds = 0;      // when the sampler saw it
};

// One GPU at one moment. Each reading is absent where the GPU or driver does not report it (a
// MIG instance has no utilisation of its own, a GeForce no ECC).
struct GpuSample {
  unsigned index = 0;  // NVML's index on this node
  std::string uuid;
  double unix_seconds = 0;
  std::optional<unsigned> utilization_percent;         // a kernel ran, of the last period
  std::optional<unsigned> memory_utilization_percent;  // memory was read or written, of the last period
  std::optional<unsigned long long> memory_used_bytes, memory_total_bytes;
  std::optional<unsigned> temperature_celsius;
  std::optional<double> power_watts;
  std::optional<double> energy_joules;  // the driver's counter, since it was loaded
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned long long> throttle_reasons;                // NVML's clocks-event bit mask
  std::optional<unsigned long long> ecc_corrected, ecc_uncorrected;  // volatile: since the driver loaded
  std::vector<GpuEvent> events;  // every Xid and double-bit ECC error seen so far, oldest first
};

// The labels every GPU series carries besides the GPU's own (gpu = NVML index, gpu_uuid).
// job_id, not job: Prometheus gives every scraped series a `job` label of its own.
struct GpuSeriesLabels {
  std::string job_id = "none";
  std::string job_name = "slurm-train";
  int rank = 0;
  std::string host;
};

// The exposition text of a rank's GPUs: slurm_train_gpu_* gauges and counters (the names and
// units in docs/monitoring.md), one series per GPU and reading.
std::string gpu_prometheus_text(const GpuSeriesLabels& labels, const std::vector<GpuSample>& gpus);

// NVML's throttle (clocks-event) reasons in words, "power cap, thermal (hardware)"; "none" for 0.
// Idle and the application's clock setting are not throttling: they are left out.
std::string throttle_reason_names(unsigned long long mask);

// "GPU 1 (GPU-8f3...): Xid 79 at 2026-12-06T08:40:12Z" for the newest event on any of `gpus`;
// empty when none has one.
std::string gpu_fault_summary(const std::vector<GpuSample>& gpus);

// Energy the GPUs used between two samples of the same GPUs, in joules; nullopt when a GPU has no
// energy counter in either (then power integrated over time would be a guess, not a reading).
std::optional<double> gpu_energy_between(const std::vector<GpuSample>& before, const std::vector<GpuSample>& after);

}  // namespace slurm_train
