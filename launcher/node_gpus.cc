#include "launcher/node_gpus.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "launcher/nvml_library.h"
#include "spank/jobenv/binding.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

bool gpu_is_given(const Environment& env, unsigned index, const std::string& uuid) {
  const auto visible = env.find("CUDA_VISIBLE_DEVICES");
  // Unset in a job step: the step was given no GPU (Slurm sets it for a step with GPUs), as the
  // in-job supervisor's node checks are; outside Slurm, every GPU is the process's to use.
  if (visible == env.end()) return env.count("SLURM_STEP_ID") == 0;
  std::vector<std::string> entries;
  try {
    entries = parse_visible_devices(visible->second);
  } catch (const InputError&) {
    return false;  // CUDA itself would use no GPU of a list it cannot read
  }
  for (const std::string& entry : entries) {
    if (entry == std::to_string(index)) return true;
    if (entry.size() >= 4 && uuid.compare(0, entry.size(), entry) == 0) return true;  // "GPU-1a2b" prefixes
  }
  return false;
}

namespace {

template <std::size_t N>
std::string text(const char (&buffer)[N]) {
  return std::string(buffer, strnlen(buffer, N));
}

}  // namespace

std::optional<NodeGpus> read_node_gpus(const Environment& env, std::string* why) {
  const Nvml* nvml = nvml_library(why);
  if (!nvml) return std::nullopt;
  const auto failed = [&](const char* call, nvmlReturn_t rc) {
    if (why) *why = std::string("NVML call ") + call + " failed: " + nvml->nvmlErrorString(rc);
    return std::nullopt;
  };
  NodeGpus node;
  char buffer[96] = {};
  if (nvml->nvmlSystemGetDriverVersion(buffer, sizeof buffer) == kNvmlSuccess) node.driver = text(buffer);
  int cuda = 0;
  if (nvml->nvmlSystemGetCudaDriverVersion(&cuda) == kNvmlSuccess) node.cuda_driver = cuda;
  unsigned count = 0;
  if (const nvmlReturn_t rc = nvml->nvmlDeviceGetCount_v2(&count); rc != kNvmlSuccess)
    return failed("nvmlDeviceGetCount_v2", rc);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (const nvmlReturn_t rc = nvml->nvmlDeviceGetHandleByIndex_v2(i, &device); rc != kNvmlSuccess)
      return failed("nvmlDeviceGetHandleByIndex_v2", rc);
    GpuFacts g;
    g.index = i;
    // What a GPU does not support (ECC on a consumer card, MIG before Ampere) stays "not reported".
    if (nvml->nvmlDeviceGetName(device, buffer, sizeof buffer) == kNvmlSuccess) g.name = text(buffer);
    g.uuid = nvml_uuid(*nvml, device);
    nvml->nvmlDeviceGetMinorNumber(device, &g.minor);
    nvml->nvmlDeviceGetCudaComputeCapability(device, &g.cc_major, &g.cc_minor);
    nvmlEnableState_t state = 0;
    if (nvml->nvmlDeviceGetPersistenceMode(device, &state) == kNvmlSuccess) g.persistence = state;
    unsigned current = 0, pending = 0;
    if (nvml->nvmlDeviceGetMigMode(device, &current, &pending) == kNvmlSuccess) {
      g.mig = static_cast<int>(current);
      g.mig_pending = static_cast<int>(pending);
    }
    g.mig_instances = nvml_mig_instance_uuids(*nvml, device);
    unsigned long long errors = 0;
    if (nvml->nvmlDeviceGetTotalEccErrors(device, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &errors) ==
        kNvmlSuccess)
      g.ecc_uncorrected_volatile = static_cast<long long>(errors);
    if (nvml->nvmlDeviceGetTotalEccErrors(device, kNvmlMemoryErrorCorrected, kNvmlAggregateEcc, &errors) ==
        kNvmlSuccess)
      g.ecc_corrected_aggregate = static_cast<long long>(errors);
    if (nvml->nvmlDeviceGetRetiredPagesPendingStatus(device, &state) == kNvmlSuccess) g.retired_pages_pending = state;
    unsigned corrected = 0, uncorrected = 0, remap_pending = 0, remap_failed = 0;
    if (nvml->nvmlDeviceGetRemappedRows(device, &corrected, &uncorrected, &remap_pending, &remap_failed) ==
        kNvmlSuccess) {
      g.remapped_rows_pending = static_cast<int>(remap_pending);
      g.remapping_failed = static_cast<int>(remap_failed);
    }
    // The device file of a GPU this process was given: a step's cgroup or the files' modes may
    // still refuse it (a GPU not given is not this process's to open).
    if (gpu_is_given(env, i, g.uuid)) {
      const std::string file = "/dev/nvidia" + std::to_string(g.minor);
      const int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
      if (fd >= 0) {
        close(fd);
      } else {
        g.open_errno = errno;
      }
    }
    node.gpus.push_back(std::move(g));
  }
  return node;
}

bool nvidia_node() {
  const char* stand_in = std::getenv("SLURM_TRAIN_NVML_LIBRARY");
  return std::filesystem::exists("/dev/nvidiactl") || (stand_in && *stand_in);
}

std::vector<Check> node_gpu_checks(const Environment& env) {
  if (!nvidia_node()) return {};
  std::string why;
  const std::optional<NodeGpus> node = read_node_gpus(env, &why);
  if (!node) return {{Verdict::kWarn, "GPU health", why + ": the GPUs' driver, ECC and MIG are not checked"}};
  return check_node_gpus(*node, this_cuda_build());
}

}  // namespace slurm_train
