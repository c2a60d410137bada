// NVML, the driver's management library, opened on first use instead of linked: it exists only
// where NVIDIA's driver is installed (libnvidia-ml.so.1), and a CPU node, a login node or a build
// machine must run every command without it. The toolkit ships no nvml.h: NVML's C ABI is stable,
// so the few types and functions used are declared here as nvml.h declares them.
// SLURM_TRAIN_NVML_LIBRARY names another file to open (the tests' stand-in library).
#pragma once

#include <string>
#include <vector>

extern "C" {
typedef int nvmlReturn_t;  // nvmlReturn_enum: NVML_SUCCESS = 0
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it device memory was read or written
} nvmlUtilization_t;
typedef struct nvmlMemory_st {
  unsigned long long total, free, used;  // bytes
} nvmlMemory_t;
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for an Xid event
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
}

namespace slurm_train {

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlNoPermission = 4;
inline constexpr int kNvmlMemoryErrorCorrected = 0, kNvmlMemoryErrorUncorrected = 1;
inline constexpr int kNvmlVolatileEcc = 0, kNvmlAggregateEcc = 1;
inline constexpr nvmlReturn_t kNvmlTimeout = 10;
inline constexpr int kNvmlTemperatureGpu = 0;                      // NVML_TEMPERATURE_GPU
inline constexpr int kNvmlClockSm = 1;                             // NVML_CLOCK_SM
inline constexpr unsigned long long kNvmlEventXid = 0x8;           // nvmlEventTypeXidCriticalError
inline constexpr unsigned long long kNvmlEventDoubleBitEcc = 0x2;  // nvmlEventTypeDoubleBitEccError

// The functions this program calls, with nvml.h's signatures.
struct Nvml {
  nvmlReturn_t (*nvmlInit_v2)();
  const char* (*nvmlErrorString)(nvmlReturn_t);
  nvmlReturn_t (*nvmlSystemGetDriverVersion)(char*, unsigned);
  nvmlReturn_t (*nvmlSystemGetCudaDriverVersion)(int*);
  nvmlReturn_t (*nvmlDeviceGetCount_v2)(unsigned*);
  nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*nvmlDeviceGetName)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*nvmlDeviceGetUUID)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*nvmlDeviceGetMinorNumber)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*nvmlDeviceGetPersistenceMode)(nvmlDevice_t, nvmlEnableState_t*);
  nvmlReturn_t (*nvmlDeviceGetMigMode)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned, nvmlDevice_t*);
  nvmlReturn_t (*nvmlDeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*nvmlDeviceGetRetiredPagesPendingStatus)(nvmlDevice_t, nvmlEnableState_t*);
  nvmlReturn_t (*nvmlDeviceGetRemappedRows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
  // Telemetry (gpu_sampler.h).
  nvmlReturn_t (*nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*nvmlDeviceGetTemperature)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*nvmlDeviceGetPowerUsage)(nvmlDevice_t, unsigned*);                        // mW
  nvmlReturn_t (*nvmlDeviceGetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*);  // mJ
  nvmlReturn_t (*nvmlDeviceGetClockInfo)(nvmlDevice_t, int, unsigned*);                    // MHz
  nvmlReturn_t (*nvmlDeviceGetCurrentClocksThrottleReasons)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*nvmlEventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*nvmlDeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*nvmlEventSetWait_v2)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
  nvmlReturn_t (*nvmlEventSetFree)(nvmlEventSet_t);
};

// The library, opened, resolved and initialised (nvmlInit_v2) on the first call, thread-safe, and
// kept; null when it cannot be, with the reason in one line in *why (no driver on this node, a
// driver too old for a function, nvmlInit's error).
const Nvml* nvml_library(std::string* why);

// A device's (or MIG instance's) UUID; "" where NVML does not say.
std::string nvml_uuid(const Nvml& nvml, nvmlDevice_t device);

// The UUIDs of a GPU's MIG instances; none where MIG is not enabled on it.
std::vector<std::string> nvml_mig_instance_uuids(const Nvml& nvml, nvmlDevice_t device);

}  // namespace slurm_train
