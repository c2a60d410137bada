// NVML, the driver's management library, opened on first use instead of linked: it exists only
// where NVIDIA's driver is installed (libnvidia-ml.so.1), and a CPU node, a login node or a build
// machine must run every command without it. The toolkit ships no nvml.h: NVML's C ABI is stable,
// so the few types and functions used are declared here as nvml.h declares them.
// SLURM_TRAIN_NVML_LIBRARY names another file to open (the tests' stand-in library).
#pragma once

#include <string>

extern "C" {
typedef int nvmlReturn_t;  // nvmlReturn_enum: NVML_SUCCESS = 0
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1
}

namespace slurm_train {

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlNoPermission = 4;
inline constexpr int kNvmlMemoryErrorCorrected = 0, kNvmlMemoryErrorUncorrected = 1;
inline constexpr int kNvmlVolatileEcc = 0, kNvmlAggregateEcc = 1;

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
};

// The library, opened, resolved and initialised (nvmlInit_v2) on the first call, thread-safe, and
// kept; null when it cannot be, with the reason in one line in *why (no driver on this node, a
// driver too old for a function, nvmlInit's error).
const Nvml* nvml_library(std::string* why);

}  // namespace slurm_train
