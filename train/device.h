// Where a run computes: train.device = auto | cpu | cuda. The probe asks the CUDA runtime how
// many GPUs this process sees; "no GPU" covers a missing or too old driver
// (cudaErrorInsufficientDriver, what a machine without NVIDIA's driver reports) as well as
// cudaErrorNoDevice and a count of zero. A build without CUDA always reports no GPU, and why.
#pragma once

#include <string>

namespace slurm_train {

struct CudaProbe {
  int devices = 0;
  std::string problem;  // why there is no usable GPU ("" when devices > 0)
};

CudaProbe probe_cuda();

enum class DeviceKind { kCpu, kCuda };

struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  std::string note;  // one line for the log when the choice needs saying (a fallback), or ""
};

// train.device against what the probe found. auto without a GPU falls back to the CPU with the
// one-line note "no GPU on this node: training on the CPU"; cuda without one is a ConfigError naming the reason. So far the training loop runs on
// the CPU only (the GPU step lives in train/cuda_mlp_step.h and bench/gpu_check.cc): auto with
// a GPU says so in its note, and cuda is refused with that reason.
DeviceChoice choose_device(const std::string& requested, const CudaProbe& probe);

}  // namespace slurm_train
