// warp_mma_probe.cuh launched on the GPU.
#include "test/cuda/warp_mma_probe.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"

#define FLASH_DYNAMIC_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#include "test/cuda/warp_mma_probe.cuh"

namespace slurm_train::cuda_test {

std::vector<float> warp_mma_probe(const std::vector<float>& a, const std::vector<float>& b, bool a_transposed,
                                  bool b_kn) {
  cuda::DeviceBuffer<float> da(256), db(256), dd(256);
  CUDA_CHECK(cudaMemcpy(da.data(), a.data(), 256 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db.data(), b.data(), 256 * sizeof(float), cudaMemcpyHostToDevice));
  warp_mma_probe_kernel<<<1, 32, kWarpMmaProbeSharedBytes>>>(da.data(), db.data(), a_transposed, b_kn, dd.data());
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> d(256);
  CUDA_CHECK(cudaMemcpy(d.data(), dd.data(), 256 * sizeof(float), cudaMemcpyDeviceToHost));
  return d;
}

}  // namespace slurm_train::cuda_test
