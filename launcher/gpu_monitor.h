// A thread on each rank that samples the rank's GPUs (gpu_sampler.h) every few seconds and
// replaces the rank's Prometheus textfile with what it read, so that a node exporter's textfile
// collector serves every rank's GPU series labelled with the job, rank, host and GPU. `run` and
// `exec` start one per rank; nothing runs in the training process's own threads but a read of
// the latest sample.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/gpu_sampler.h"
#include "launcher/gpu_telemetry.h"
#include "spank/jobenv/environment.h"
#include "train/loop/metrics.h"

namespace slurm_train {

// The rank's own textfile beside the job's: "/metrics/train.prom" -> "/metrics/train.rank3.prom"
// (a collector reads files ending in .prom); "" stays "".
std::string rank_prometheus_path(const std::string& job_file, int rank);

class GpuMonitor;

// How often the monitors of start_gpu_monitor() sample, in seconds.
double gpu_sample_seconds();

// The monitor of the GPUs given to this process, or null where it was given none. Where the node
// has NVIDIA's devices (or the tests' stand-in NVML is named) and NVML cannot be read, `warn`
// gets the reason in one line; a CPU node says nothing.
std::unique_ptr<GpuMonitor> start_gpu_monitor(const Environment& env, GpuSeriesLabels labels,
                                              std::string prometheus_file,
                                              std::function<void(const std::string&)> warn);

// A rank's GPUs in the training loop's terms (trainer.h): mean utilisation, summed power and
// energy; nullopt for no GPU.
std::optional<GpuReading> gpu_reading(const std::vector<GpuSample>& gpus);

class GpuMonitor {
 public:
  // Samples at once, then every `interval_seconds`; `prometheus_file` ("": none) is replaced
  // atomically after each sample. A failed write is reported once on `warn` and retried.
  GpuMonitor(std::unique_ptr<GpuSampler> sampler, GpuSeriesLabels labels, std::string prometheus_file,
             double interval_seconds, std::function<void(const std::string&)> warn);
  // Stops the thread and writes a last sample.
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // The newest sample (taken at most interval_seconds ago).
  std::vector<GpuSample> latest() const;
  // A sample taken now (the energy counters at the start and end of a run), also published.
  std::vector<GpuSample> sample_now();

 private:
  void run();
  std::vector<GpuSample> take_and_publish();  // mutex_ held

  std::unique_ptr<GpuSampler> sampler_;
  GpuSeriesLabels labels_;
  std::string file_;
  double interval_;
  std::function<void(const std::string&)> warn_;
  bool warned_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<GpuSample> latest_;
  std::thread thread_;
};

}  // namespace slurm_train
