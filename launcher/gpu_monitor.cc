#include "launcher/gpu_monitor.h"

#include <chrono>
#include <exception>
#include <utility>

#include "launcher/node_gpus.h"
#include "train/io/durable_file.h"

namespace slurm_train {

std::string rank_prometheus_path(const std::string& job_file, int rank) {
  if (job_file.empty()) return "";
  const std::string suffix = ".prom";
  const bool prom = job_file.size() > suffix.size() && job_file.ends_with(suffix);
  const std::string stem = prom ? job_file.substr(0, job_file.size() - suffix.size()) : job_file;
  return stem + ".rank" + std::to_string(rank) + suffix;
}

// Often enough for a dashboard and a throttle that lasts; rare enough that the queries (about
// 0.1-1 ms a GPU) cost nothing measurable.
constexpr double kSampleSeconds = 5;

double gpu_sample_seconds() { return kSampleSeconds; }

std::unique_ptr<GpuMonitor> start_gpu_monitor(const Environment& env, GpuSeriesLabels labels,
                                              std::string prometheus_file,
                                              std::function<void(const std::string&)> warn) {
  std::string why;
  std::unique_ptr<GpuSampler> sampler = GpuSampler::open(env, &why);
  if (!sampler) {
    if (!why.empty() && nvidia_node() && warn) warn("GPU telemetry off: " + why);
    return nullptr;
  }
  return std::make_unique<GpuMonitor>(std::move(sampler), std::move(labels), std::move(prometheus_file), kSampleSeconds,
                                      std::move(warn));
}

std::optional<GpuReading> gpu_reading(const std::vector<GpuSample>& gpus) {
  if (gpus.empty()) return std::nullopt;
  GpuReading r;
  double energy = 0;
  bool counted = true;
  unsigned utilized = 0;
  for (const GpuSample& g : gpus) {
    if (g.utilization_percent) r.utilization_percent += *g.utilization_percent, ++utilized;
    r.power_watts += g.power_watts.value_or(0);
    if (g.energy_joules) {
      energy += *g.energy_joules;
    } else {
      counted = false;
    }
  }
  if (utilized > 0) r.utilization_percent /= utilized;
  if (counted) r.energy_joules = energy;
  return r;
}

GpuMonitor::GpuMonitor(std::unique_ptr<GpuSampler> sampler, GpuSeriesLabels labels, std::string prometheus_file,
                       double interval_seconds, std::function<void(const std::string&)> warn)
    : sampler_(std::move(sampler)),
      labels_(std::move(labels)),
      file_(std::move(prometheus_file)),
      interval_(interval_seconds),
      warn_(std::move(warn)) {
  {
    std::lock_guard lock(mutex_);
    take_and_publish();
  }
  thread_ = std::thread([this] { run(); });
}

GpuMonitor::~GpuMonitor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard lock(mutex_);
  take_and_publish();
}

std::vector<GpuSample> GpuMonitor::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

std::vector<GpuSample> GpuMonitor::sample_now() {
  std::lock_guard lock(mutex_);
  return take_and_publish();
}

void GpuMonitor::run() {
  std::unique_lock lock(mutex_);
  const auto every = std::chrono::duration<double>(interval_);
  while (!wake_.wait_for(lock, every, [this] { return stopping_; })) take_and_publish();
}

std::vector<GpuSample> GpuMonitor::take_and_publish() {
  latest_ = sampler_->sample();
  if (!file_.empty()) {
    try {
      write_file_durably(file_, gpu_prometheus_text(labels_, latest_));
    } catch (const std::exception& e) {
      if (!warned_ && warn_) warn_(std::string("GPU telemetry: ") + e.what() + " (retried at each sample)");
      warned_ = true;
    }
  }
  return latest_;
}

}  // namespace slurm_train
