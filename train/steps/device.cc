#include "train/steps/device.h"

#include <fmt/format.h>

#include <cstdlib>

#if defined(SLURM_TRAIN_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "spank/jobenv/binding.h"
#include "spank/jobenv/text.h"
#include "train/config/config.h"

namespace slurm_train {

CudaProbe probe_cuda() {
#if defined(SLURM_TRAIN_WITH_CUDA)
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // the runtime keeps the error as the last one: clear it
    return {0, fmt::format("cudaGetDeviceCount: {}: {}", cudaGetErrorName(rc), cudaGetErrorString(rc)), {}};
  }
  if (count == 0) return {0, "cudaGetDeviceCount: 0 devices visible (check CUDA_VISIBLE_DEVICES)", {}};
  CudaProbe probe{count, "", {}};
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
      probe.names.emplace_back(prop.name);
    } else {
      cudaGetLastError();
      probe.names.emplace_back("unknown GPU");
    }
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  probe.mig = mig_instances(visible ? visible : "");
  return probe;
#else
  return {0, "this build has no CUDA support (nvcc was not found when it was built)", {}};
#endif
}

std::vector<std::string> mig_instances(const std::string& visible_devices) {
  std::vector<std::string> mig;
  try {
    for (const std::string& entry : parse_visible_devices(visible_devices))
      mig.push_back(is_mig_instance(entry) ? entry : "");
  } catch (const InputError&) {
    return {};  // a list the runtime cannot read names no instance
  }
  return mig;
}

DeviceChoice choose_device(const std::string& requested, const CudaProbe& probe) {
  if (requested == "cpu") return {DeviceKind::kCpu, ""};
  if (requested != "auto" && requested != "cuda")
    throw ConfigError(fmt::format("train.device = '{}': expected one of: auto, cpu, cuda", requested));
  if (probe.devices > 0) return {DeviceKind::kCuda, ""};
  if (requested == "cuda")
    throw ConfigError(fmt::format("train.device = cuda, but there is no usable GPU: {}", probe.problem));
  // Most CPU nodes have no NVIDIA driver at all: the runtime's reason (cudaErrorInsufficientDriver)
  // would only alarm. train.device = cuda and `slurm-train doctor` name it when it matters.
  return {DeviceKind::kCpu, "no GPU on this node: training on the CPU"};
}

int gpu_for_rank(int configured, int visible, int local_rank, int local_size) {
  if (configured >= 0) {
    if (configured >= visible)
      throw ConfigError(
          fmt::format("train.gpu = {}: this rank sees {} GPU(s), numbered 0 to {}", configured, visible, visible - 1));
    if (local_size > 1)
      throw ConfigError(
          fmt::format("train.gpu = {} with {} ranks on this node: they would share one GPU; leave "
                      "train.gpu at -1 (one GPU per rank)",
                      configured, local_size));
    return configured;
  }
  if (visible == 1) return 0;  // the binding gave this rank its own
  if (local_size > visible)
    throw ConfigError(
        fmt::format("{} ranks on this node and {} GPU(s) visible to each: ranks would share a GPU; ask "
                    "for one GPU per task (srun --gpus-per-task=1, or --ntasks-per-node={}), or set "
                    "train.device = cpu",
                    local_size, visible, visible));
  return local_rank;
}

PrecisionChoice choose_precision(const std::string& requested, DeviceKind device) {
  if (requested != "auto" && requested != "fp32" && requested != "tf32" && requested != "bf16")
    throw ConfigError(fmt::format("train.precision = '{}': expected one of: auto, fp32, tf32, bf16", requested));
  if (device == DeviceKind::kCuda) return {requested == "auto" ? "bf16" : requested, ""};
  if (requested == "tf32" || requested == "bf16")
    return {"fp32", fmt::format("train.precision = {} applies to the GPU: the CPU trains in fp32", requested)};
  return {"fp32", ""};
}

DevicePlan plan_device(const std::string& device, const std::string& precision, int gpu, const CudaProbe& probe,
                       int local_rank, int local_size) {
  DevicePlan plan;
  DeviceChoice choice = choose_device(device, probe);
  const PrecisionChoice p = choose_precision(precision, choice.kind);
  plan.kind = choice.kind;
  plan.precision = p.precision;
  plan.note = choice.note;
  if (!p.note.empty()) plan.note += (plan.note.empty() ? "" : "\n") + p.note;
  if (plan.kind == DeviceKind::kCuda) {
    plan.gpu = gpu_for_rank(gpu, probe.devices, local_rank, local_size);
    const std::string model = static_cast<std::size_t>(plan.gpu) < probe.names.size() ? probe.names[plan.gpu] : "GPU";
    const auto gpu_index = static_cast<std::size_t>(plan.gpu);
    const std::string mig =
        gpu_index < probe.mig.size() && !probe.mig[gpu_index].empty() ? probe.mig[gpu_index] + ", " : "";
    plan.name = fmt::format("cuda:{} ({}, {}{})", plan.gpu, model, mig, plan.precision);
  }
  return plan;
}

namespace {

bool on_gpu(const std::string& device) { return device.rfind("cuda", 0) == 0; }

// "bf16" of "cuda:0 (NVIDIA H200, bf16)"; the CPU computes in fp32.
std::string precision_in(const std::string& device) {
  if (!on_gpu(device)) return "fp32";
  const auto comma = device.rfind(", "), close = device.rfind(')');
  if (comma == std::string::npos || close == std::string::npos || close < comma) return "";
  return device.substr(comma + 2, close - comma - 2);
}

}  // namespace

std::string device_change(const std::string& written, const std::string& now) {
  if (written.empty() || now.empty()) return "";
  if (on_gpu(written) == on_gpu(now) && precision_in(written) == precision_in(now)) return "";
  return fmt::format(
      "the checkpoint was written on {}; this run continues on {}: the same state, rounded from here "
      "as this device computes",
      on_gpu(written) ? "the GPU, " + written : "the CPU", on_gpu(now) ? "the GPU, " + now : "the CPU");
}

}  // namespace slurm_train
