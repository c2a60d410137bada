// One warp's 16 x 16 x 16 product through kernels/cuda/warp_mma.cuh, its operands loaded by
// ldmatrix in each of the ways the attention kernels load them: A as stored ([m][k]) or
// transposed ([k][m]), B stored [n][k] or [k][n]. Compiled by nvcc for the GPU
// (warp_mma_probe.cu) and by g++ on the CPU emulation (test/unit/warp_mma_emulated_test.cc), so
// both run the same device code against the same plain product. Dynamic shared memory:
// kWarpMmaProbeSharedBytes, through FLASH_DYNAMIC_SHARED.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/warp_mma.cuh"

namespace slurm_train::cuda_test {

constexpr int kWarpMmaProbeLd = 24;  // 48-byte rows: 16-byte aligned, as ldmatrix needs
constexpr unsigned kWarpMmaProbeSharedBytes = 2 * 16 * kWarpMmaProbeLd * sizeof(__nv_bfloat16);

// a [16][16] and b [16 k][16 n] row-major fp32 (values exact in bf16); d [16][16] = a b.
__global__ void warp_mma_probe_kernel(const float* a, const float* b, bool a_transposed, bool b_kn, float* d) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int ld = kWarpMmaProbeLd;
  __nv_bfloat16* sa = reinterpret_cast<__nv_bfloat16*>(shared);
  __nv_bfloat16* sb = sa + 16 * ld;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32) {
    const int r = i / 16, c = i % 16;
    sa[a_transposed ? c * ld + r : r * ld + c] = __float2bfloat16(a[i]);  // A(r, c)
    sb[b_kn ? r * ld + c : c * ld + r] = __float2bfloat16(b[i]);          // B(k = r, n = c)
  }
  __syncwarp();
  std::uint32_t fa[4], fb[4];
  if (a_transposed)
    ldmatrix_x4_trans(fa, shared_address(sa + (lane / 16 * 8 + lane % 8) * ld + lane / 8 % 2 * 8));
  else
    ldmatrix_x4(fa, shared_address(sa + lane % 16 * ld + lane / 16 * 8));
  if (b_kn)
    ldmatrix_x4_trans(fb, shared_address(sb + (lane / 8 % 2 * 8 + lane % 8) * ld + lane / 16 * 8));
  else
    ldmatrix_x4(fb, shared_address(sb + (lane / 16 * 8 + lane % 8) * ld + lane / 8 % 2 * 8));
  float acc[2][4] = {};
  const std::uint32_t first[2] = {fb[0], fb[1]}, second[2] = {fb[2], fb[3]};
  mma_bf16_16816(acc[0], fa, first);
  mma_bf16_16816(acc[1], fa, second);
  for (int j = 0; j < 2; ++j)
    for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 16 + 8 * j + 2 * t + e % 2] = acc[j][e];
}

}  // namespace slurm_train::cuda_test
