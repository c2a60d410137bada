// Reads the GPUs given to this process (CUDA_VISIBLE_DEVICES, as CUDA takes it) through NVML,
// loaded on first use (nvml_library.h): the readings of gpu_telemetry.h's GpuSample, and the Xid
// and double-bit ECC events the driver reports for them. A MIG instance given is watched through
// its GPU: utilisation, power and energy are the whole GPU's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/gpu_telemetry.h"
#include "spank/jobenv/environment.h"

namespace slurm_train {

class GpuSampler {
 public:
  // Null when there is nothing to watch: *why is then the reason in one line where NVML cannot be
  // loaded or read, and empty where the process was simply given no GPU (a CPU node, a CPU job).
  static std::unique_ptr<GpuSampler> open(const Environment& env, std::string* why);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Every given GPU's readings now, with every event seen since open(). A few NVML queries a GPU:
  // about 0.1-1 ms in all (docs/monitoring.md).
  std::vector<GpuSample> sample();

 private:
  struct Gpu;
  GpuSampler() = default;
  void take_events();
  std::vector<std::unique_ptr<Gpu>> gpus_;
  void* events_ = nullptr;  // the nvmlEventSet_t, null where the driver offers no events
};

}  // namespace slurm_train
