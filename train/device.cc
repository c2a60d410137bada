#include "train/device.h"

#include <fmt/format.h>

#if defined(SLURM_TRAIN_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "train/config.h"

namespace slurm_train {

CudaProbe probe_cuda() {
#if defined(SLURM_TRAIN_WITH_CUDA)
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // the runtime keeps the error as the last one: clear it
    return {0, fmt::format("cudaGetDeviceCount: {}: {}", cudaGetErrorName(rc), cudaGetErrorString(rc))};
  }
  if (count == 0) return {0, "cudaGetDeviceCount: 0 devices visible (check CUDA_VISIBLE_DEVICES)"};
  return {count, ""};
#else
  return {0, "this build has no CUDA support (nvcc was not found when it was built)"};
#endif
}

DeviceChoice choose_device(const std::string& requested, const CudaProbe& probe) {
  if (requested == "cpu") return {DeviceKind::kCpu, ""};
  if (requested != "auto" && requested != "cuda")
    throw ConfigError(fmt::format("train.device = '{}': expected one of: auto, cpu, cuda", requested));
  const bool gpu = probe.devices > 0;
  if (requested == "cuda") {
    if (!gpu) throw ConfigError(fmt::format("train.device = cuda, but there is no usable GPU: {}", probe.problem));
    throw ConfigError(fmt::format(
        "train.device = cuda: {} GPU(s) found, but the training loop runs on the CPU only so far (the GPU step is "
        "exercised by scripts/gpu-check.sh); use train.device = auto or cpu",
        probe.devices));
  }
  // Most CPU nodes have no NVIDIA driver at all: the runtime's reason (cudaErrorInsufficientDriver)
  // would only alarm. train.device = cuda and `slurm-train doctor` name it when it matters.
  if (!gpu) return {DeviceKind::kCpu, "no GPU on this node: training on the CPU"};
  return {DeviceKind::kCpu,
          fmt::format("{} CUDA device(s) found, but the training loop runs on the CPU only so far: training on the CPU",
                      probe.devices)};
}

}  // namespace slurm_train
