// The error reports of CUDA_CHECK and CUBLAS_CHECK.
#include "kernels/cuda/cuda_check.h"

#include <unistd.h>

#include <string>

#include "kernels/cuda/cublaslt_library.h"

namespace slurm_train::cuda {
namespace {

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

const char* cuda_hint(cudaError_t rc) {
  switch (rc) {
    case cudaErrorInsufficientDriver:
      return " (no NVIDIA driver, or one older than this CUDA runtime: check nvidia-smi)";
    case cudaErrorNoDevice:
      return " (no GPU visible: check CUDA_VISIBLE_DEVICES and the job's --gpus request)";
    case cudaErrorInvalidDevice:
      return " (device index beyond the visible GPUs: check CUDA_VISIBLE_DEVICES and the binding)";
    case cudaErrorMemoryAllocation:
      return " (out of GPU memory: a smaller batch or model, or another process holds the GPU)";
    case cudaErrorNoKernelImageForDevice:
      return " (this GPU's architecture is not among the build's: sm_80, sm_90 and PTX for newer)";
    default:
      return "";
  }
}

// "device 0 (NVIDIA H200)", or "" when even that cannot be asked.
std::string current_device() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return ", device " + std::to_string(device);
  }
  return ", device " + std::to_string(device) + " (" + prop.name + ")";
}

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

}  // namespace

void out_of_device_memory(std::size_t bytes, const char* file, int line) {
  cudaGetLastError();  // the failed allocation's error is not sticky: clear it
  std::size_t free = 0, total = 0;
  const bool known = cudaMemGetInfo(&free, &total) == cudaSuccess;
  if (!known) cudaGetLastError();
  throw CudaError("out of GPU memory at " + std::string(file) + ":" + std::to_string(line) + " on " + host_name() +
                  current_device() + ": asked for " + mib(bytes) +
                  (known ? ", " + mib(free) + " free of " + mib(total) : std::string(", free memory unknown")) +
                  "; lower train.global_batch or train.eval_batch, use train.precision = bf16, or make sure no other "
                  "process holds this GPU (nvidia-smi)");
}

void cuda_fail(cudaError_t rc, const char* call, const char* file, int line) {
  throw CudaError("CUDA call " + std::string(call) + " failed at " + file + ":" + std::to_string(line) + " on " +
                  host_name() + current_device() + ": " + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc) +
                  cuda_hint(rc));
}

void cublas_fail(cublasStatus_t rc, const char* call, const char* file, int line) {
  const char* hint =
      rc == CUBLAS_STATUS_NOT_SUPPORTED   ? " (this combination of types, layout, alignment and epilogue has no kernel)"
      : rc == CUBLAS_STATUS_INVALID_VALUE ? " (a dimension, leading dimension or attribute is out of range)"
                                          : "";
  throw CudaError("cuBLAS call " + std::string(call) + " failed at " + file + ":" + std::to_string(line) + " on " +
                  host_name() + ": " + cublaslt().cublasLtGetStatusName(rc) + ": " +
                  cublaslt().cublasLtGetStatusString(rc) + hint);
}

}  // namespace slurm_train::cuda
