// Where a run computes: train.device = auto | cpu | cuda, train.gpu and train.precision. The probe
// asks the CUDA runtime which GPUs this process sees; "no GPU" covers a missing or too old driver
// (cudaErrorInsufficientDriver, what a machine without NVIDIA's driver reports) as well as
// cudaErrorNoDevice and a count of zero. A build without CUDA always reports no GPU, and why.
#pragma once

#include <string>
#include <vector>

namespace slurm_train {

struct CudaProbe {
  int devices = 0;
  std::string problem;             // why there is no usable GPU ("" when devices > 0)
  std::vector<std::string> names;  // per visible device, when known ("NVIDIA H200")
  // Per visible device, its MIG instance's UUID ("MIG-...") where CUDA_VISIBLE_DEVICES gave it as
  // one (Slurm does for MIG instances; the runtime numbers them in that order), else "".
  std::vector<std::string> mig = {};
};

// The MIG UUID of each entry of a CUDA_VISIBLE_DEVICES value, in order ("" for an entry that is
// an index or a GPU's UUID).
std::vector<std::string> mig_instances(const std::string& visible_devices);

CudaProbe probe_cuda();

enum class DeviceKind { kCpu, kCuda };

struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  std::string note;  // one line for the log when the choice needs saying (a fallback), or ""
};

// train.device against what the probe found: cpu is the CPU; cuda is the GPU, or a ConfigError
// naming the reason there is none; auto is the GPU when there is one, else the CPU with the
// one-line note "no GPU on this node: training on the CPU" (not the runtime's error text).
DeviceChoice choose_device(const std::string& requested, const CudaProbe& probe);

// Which of the `visible` GPUs a rank drives, one GPU per rank. train.gpu >= 0 names one; -1
// (automatic) takes the only one when the binding left each rank one (spank_train's
// --train-bind, --gpus-per-task=1), else the rank's place among the node's ranks. Throws
// ConfigError when ranks would share a GPU or train.gpu is not among the visible ones.
int gpu_for_rank(int configured, int visible, int local_rank, int local_size);

// train.precision for the device: auto is bf16 on the GPU (fp32 master weights) and fp32 on the
// CPU, which computes in fp32 whatever is asked (the note says so for tf32 and bf16).
struct PrecisionChoice {
  std::string precision;  // fp32 | tf32 | bf16
  std::string note;
};
PrecisionChoice choose_precision(const std::string& requested, DeviceKind device);

// The device a rank of a run trains on, for its log and the rank table: "cpu",
// "cuda:1 (NVIDIA H200, bf16)", or on a MIG instance "cuda:0 (NVIDIA H100 80GB HBM3 MIG 1g.10gb,
// MIG-5e3f..., bf16)".
struct DevicePlan {
  DeviceKind kind = DeviceKind::kCpu;
  int gpu = -1;
  std::string precision = "fp32";
  std::string name = "cpu";
  std::string note;  // lines for the log, or ""
};
DevicePlan plan_device(const std::string& device, const std::string& precision, int gpu, const CudaProbe& probe,
                       int local_rank, int local_size);

// The line a resume prints when the checkpoint was written on another kind of device or in
// another precision than this run's (DevicePlan::name of each), or "" (the same, or a file that
// does not record it). Checkpoints hold fp32 state in one layout whatever the device.
std::string device_change(const std::string& written, const std::string& now);

}  // namespace slurm_train
