#include "launcher/gpu_sampler.h"

#include <chrono>
#include <climits>

#include "launcher/node_gpus.h"
#include "launcher/nvml_library.h"

namespace slurm_train {

struct GpuSampler::Gpu {
  nvmlDevice_t device = nullptr;
  unsigned index = 0;
  std::string uuid;
  std::vector<GpuEvent> events;
};

namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Whether CUDA_VISIBLE_DEVICES gives one of the MIG instances of `device`.
bool gives_an_instance(const Nvml& nvml, const Environment& env, nvmlDevice_t device) {
  for (const std::string& uuid : nvml_mig_instance_uuids(nvml, device))
    // An instance has no index of CUDA's numbering: only its UUID can name it.
    if (gpu_is_given(env, UINT_MAX, uuid)) return true;
  return false;
}

}  // namespace

std::unique_ptr<GpuSampler> GpuSampler::open(const Environment& env, std::string* why) {
  if (why) why->clear();
  const Nvml* nvml = nvml_library(why);
  if (!nvml) return nullptr;
  unsigned count = 0;
  if (const nvmlReturn_t rc = nvml->nvmlDeviceGetCount_v2(&count); rc != kNvmlSuccess) {
    if (why) *why = std::string("NVML call nvmlDeviceGetCount_v2 failed: ") + nvml->nvmlErrorString(rc);
    return nullptr;
  }
  std::unique_ptr<GpuSampler> sampler(new GpuSampler);
  for (unsigned i = 0; i < count; ++i) {
    auto gpu = std::make_unique<Gpu>();
    if (nvml->nvmlDeviceGetHandleByIndex_v2(i, &gpu->device) != kNvmlSuccess) continue;
    gpu->index = i;
    gpu->uuid = nvml_uuid(*nvml, gpu->device);
    if (gpu_is_given(env, i, gpu->uuid) || gives_an_instance(*nvml, env, gpu->device))
      sampler->gpus_.push_back(std::move(gpu));
  }
  if (sampler->gpus_.empty()) return nullptr;
  nvmlEventSet_t set = nullptr;
  if (nvml->nvmlEventSetCreate(&set) == kNvmlSuccess) {
    bool any = false;
    for (const auto& gpu : sampler->gpus_) {
      // A GPU without ECC refuses the ECC event: it still reports Xids.
      if (nvml->nvmlDeviceRegisterEvents(gpu->device, kNvmlEventXid | kNvmlEventDoubleBitEcc, set) == kNvmlSuccess ||
          nvml->nvmlDeviceRegisterEvents(gpu->device, kNvmlEventXid, set) == kNvmlSuccess)
        any = true;
    }
    if (any) {
      sampler->events_ = set;
    } else {
      nvml->nvmlEventSetFree(set);
    }
  }
  return sampler;
}

GpuSampler::~GpuSampler() {
  if (events_) nvml_library(nullptr)->nvmlEventSetFree(static_cast<nvmlEventSet_t>(events_));
}

void GpuSampler::take_events() {
  if (!events_) return;
  const Nvml& nvml = *nvml_library(nullptr);
  for (;;) {
    nvmlEventData_t data{};
    if (nvml.nvmlEventSetWait_v2(static_cast<nvmlEventSet_t>(events_), &data, 0) != kNvmlSuccess) return;
    for (const auto& gpu : gpus_) {
      if (gpu->device != data.device) continue;
      GpuEvent e;
      e.kind = data.eventType == kNvmlEventDoubleBitEcc ? GpuEvent::Kind::kDoubleBitEcc : GpuEvent::Kind::kXid;
      e.code = data.eventData;
      e.unix_seconds = unix_now();
      gpu->events.push_back(e);
    }
  }
}

std::vector<GpuSample> GpuSampler::sample() {
  const Nvml& nvml = *nvml_library(nullptr);
  take_events();
  std::vector<GpuSample> out;
  const double now = unix_now();
  for (const auto& gpu : gpus_) {
    GpuSample s;
    s.index = gpu->index;
    s.uuid = gpu->uuid;
    s.unix_seconds = now;
    s.events = gpu->events;
    nvmlDevice_t d = gpu->device;
    if (nvmlUtilization_t u{}; nvml.nvmlDeviceGetUtilizationRates(d, &u) == kNvmlSuccess) {
      s.utilization_percent = u.gpu;
      s.memory_utilization_percent = u.memory;
    }
    if (nvmlMemory_t m{}; nvml.nvmlDeviceGetMemoryInfo(d, &m) == kNvmlSuccess) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
    }
    if (unsigned t = 0; nvml.nvmlDeviceGetTemperature(d, kNvmlTemperatureGpu, &t) == kNvmlSuccess)
      s.temperature_celsius = t;
    if (unsigned mw = 0; nvml.nvmlDeviceGetPowerUsage(d, &mw) == kNvmlSuccess) s.power_watts = mw / 1e3;
    if (unsigned long long mj = 0; nvml.nvmlDeviceGetTotalEnergyConsumption(d, &mj) == kNvmlSuccess)
      s.energy_joules = static_cast<double>(mj) / 1e3;
    if (unsigned mhz = 0; nvml.nvmlDeviceGetClockInfo(d, kNvmlClockSm, &mhz) == kNvmlSuccess) s.sm_clock_mhz = mhz;
    if (unsigned long long r = 0; nvml.nvmlDeviceGetCurrentClocksThrottleReasons(d, &r) == kNvmlSuccess)
      s.throttle_reasons = r;
    const int uncorrected = kNvmlMemoryErrorUncorrected, corrected = kNvmlMemoryErrorCorrected;
    if (unsigned long long n = 0; nvml.nvmlDeviceGetTotalEccErrors(d, corrected, kNvmlVolatileEcc, &n) == kNvmlSuccess)
      s.ecc_corrected = n;
    if (unsigned long long n = 0;
        nvml.nvmlDeviceGetTotalEccErrors(d, uncorrected, kNvmlVolatileEcc, &n) == kNvmlSuccess)
      s.ecc_uncorrected = n;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace slurm_train
