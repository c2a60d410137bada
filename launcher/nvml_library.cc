#include "launcher/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace slurm_train {

namespace {

struct Opened {
  Nvml nvml{};
  bool ok = false;
  std::string why;
};

std::string loader_error() {
  const char* why = dlerror();
  return why ? why : "no reason given";
}

Opened open_nvml() {
  Opened o;
  const char* chosen = std::getenv("SLURM_TRAIN_NVML_LIBRARY");
  const std::string file = chosen && *chosen ? chosen : "libnvidia-ml.so.1";
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    o.why = "NVML (" + file + ") cannot be loaded: " + loader_error() + " (no NVIDIA driver on this node?)";
    return o;
  }
  bool resolved = true;
  const auto resolve = [&](auto& function, const char* name) {
    if (!resolved) return;
    dlerror();
    void* symbol = dlsym(library, name);
    if (!symbol) {
      o.why = "NVML (" + file + ") has no " + name + ": a driver older than this program expects";
      resolved = false;
      return;
    }
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
  };
  Nvml& n = o.nvml;
  resolve(n.nvmlInit_v2, "nvmlInit_v2");
  resolve(n.nvmlErrorString, "nvmlErrorString");
  resolve(n.nvmlSystemGetDriverVersion, "nvmlSystemGetDriverVersion");
  resolve(n.nvmlSystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion");
  resolve(n.nvmlDeviceGetCount_v2, "nvmlDeviceGetCount_v2");
  resolve(n.nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2");
  resolve(n.nvmlDeviceGetName, "nvmlDeviceGetName");
  resolve(n.nvmlDeviceGetUUID, "nvmlDeviceGetUUID");
  resolve(n.nvmlDeviceGetMinorNumber, "nvmlDeviceGetMinorNumber");
  resolve(n.nvmlDeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability");
  resolve(n.nvmlDeviceGetPersistenceMode, "nvmlDeviceGetPersistenceMode");
  resolve(n.nvmlDeviceGetMigMode, "nvmlDeviceGetMigMode");
  resolve(n.nvmlDeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
  resolve(n.nvmlDeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
  resolve(n.nvmlDeviceGetTotalEccErrors, "nvmlDeviceGetTotalEccErrors");
  resolve(n.nvmlDeviceGetRetiredPagesPendingStatus, "nvmlDeviceGetRetiredPagesPendingStatus");
  resolve(n.nvmlDeviceGetRemappedRows, "nvmlDeviceGetRemappedRows");
  resolve(n.nvmlDeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
  resolve(n.nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  resolve(n.nvmlDeviceGetTemperature, "nvmlDeviceGetTemperature");
  resolve(n.nvmlDeviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
  resolve(n.nvmlDeviceGetTotalEnergyConsumption, "nvmlDeviceGetTotalEnergyConsumption");
  resolve(n.nvmlDeviceGetClockInfo, "nvmlDeviceGetClockInfo");
  resolve(n.nvmlDeviceGetCurrentClocksThrottleReasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  resolve(n.nvmlEventSetCreate, "nvmlEventSetCreate");
  resolve(n.nvmlDeviceRegisterEvents, "nvmlDeviceRegisterEvents");
  resolve(n.nvmlEventSetWait_v2, "nvmlEventSetWait_v2");
  resolve(n.nvmlEventSetFree, "nvmlEventSetFree");
  if (!resolved) {
    dlclose(library);
    return o;
  }
  if (const nvmlReturn_t rc = n.nvmlInit_v2(); rc != kNvmlSuccess) {
    o.why = std::string("NVML call nvmlInit_v2 failed: ") + n.nvmlErrorString(rc);
    dlclose(library);
    return o;
  }
  o.ok = true;  // kept open and initialised for the life of the process
  return o;
}

}  // namespace

const Nvml* nvml_library(std::string* why) {
  static const Opened opened = open_nvml();
  if (!opened.ok) {
    if (why) *why = opened.why;
    return nullptr;
  }
  return &opened.nvml;
}

std::string nvml_uuid(const Nvml& nvml, nvmlDevice_t device) {
  char text[96] = {};
  if (nvml.nvmlDeviceGetUUID(device, text, sizeof text) != kNvmlSuccess) return "";
  return std::string(text, strnlen(text, sizeof text));
}

std::vector<std::string> nvml_mig_instance_uuids(const Nvml& nvml, nvmlDevice_t device) {
  std::vector<std::string> uuids;
  unsigned current = 0, pending = 0, most = 0;
  if (nvml.nvmlDeviceGetMigMode(device, &current, &pending) != kNvmlSuccess || current != 1) return uuids;
  if (nvml.nvmlDeviceGetMaxMigDeviceCount(device, &most) != kNvmlSuccess) return uuids;
  for (unsigned m = 0; m < most; ++m) {
    nvmlDevice_t instance = nullptr;
    if (nvml.nvmlDeviceGetMigDeviceHandleByIndex(device, m, &instance) != kNvmlSuccess) continue;
    if (std::string uuid = nvml_uuid(nvml, instance); !uuid.empty()) uuids.push_back(std::move(uuid));
  }
  return uuids;
}

}  // namespace slurm_train
