// Host side of the tensor-core attention (see flash_attention.h).
#include "kernels/cuda/flash_attention.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"

#define FLASH_DYNAMIC_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#include "kernels/cuda/flash_attention_kernels.cuh"

namespace slurm_train::cuda {

namespace {

using namespace flash_detail;

int max_shared_bytes() {
  int device = 0, bytes = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

int head_size(const char* name, int B, int T, int C, int H) {
  const std::string shape = std::string(name) + ": B=" + std::to_string(B) + ", T=" + std::to_string(T) +
                            ", C=" + std::to_string(C) + ", H=" + std::to_string(H);
  if (B < 0 || T < 0 || H <= 0 || C <= 0 || C % H != 0)
    throw std::invalid_argument(shape + ": C must be a positive multiple of H");
  if (!flash_attention_supported(C, H))
    throw std::invalid_argument(shape + ": head size " + std::to_string(C / H) +
                                " is not a multiple of 16 up to 128 whose tiles fit this GPU's shared memory");
  if (static_cast<long long>(B) * H > 0x7fffffffLL || (T + kFlashTile - 1) / kFlashTile > 65535)
    throw std::invalid_argument(shape + ": more blocks than a grid takes");
  return C / H;
}

// The inputs are read four floats at a time (stage_rows), the outputs written two at a time.
void require_aligned(const char* name, const char* what, const float* p, unsigned bytes) {
  if (reinterpret_cast<std::uintptr_t>(p) % bytes != 0)
    throw std::invalid_argument(std::string(name) + ": " + what + " is not " + std::to_string(bytes) + "-byte aligned");
}

// Opts the kernel in to more than 48 KiB of dynamic shared memory (cheap: an attribute).
template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The delta's floats, rounded up to keep the dS tiles after them 256-byte aligned.
std::size_t delta_floats(int B, int T, int H) { return (static_cast<std::size_t>(B) * H * T + 63) / 64 * 64; }

}  // namespace

std::size_t flash_attention_backward_scratch_floats(int B, int T, int H) {
  if (B <= 0 || T <= 0 || H <= 0) return 0;
  const std::size_t tiles = static_cast<std::size_t>(B) * H * static_cast<std::size_t>(flash_ds_tiles(T));
  return delta_floats(B, T, H) + tiles * kFlashTileElements * sizeof(bf16) / sizeof(float);
}

bool flash_attention_supported(int C, int H) {
  if (H <= 0 || C <= 0 || C % H != 0) return false;
  const int hs = C / H;
  if (hs % 16 != 0 || hs > 128) return false;
  const std::size_t need = std::max(flash_forward_shared_bytes(hs), flash_backward_shared_bytes(hs));
  return need <= static_cast<std::size_t>(max_shared_bytes());
}

void flash_attention_forward(int B, int T, int C, int H, const float* qkv, float* out, float* logsumexp,
                             cudaStream_t stream, __nv_bfloat16* out_copy) {
  const int hs = head_size("flash_attention_forward", B, T, C, H);
  if (B == 0 || T == 0) return;
  require_aligned("flash_attention_forward", "qkv", qkv, 16);
  require_aligned("flash_attention_forward", "out", out, 8);
  if (reinterpret_cast<std::uintptr_t>(out_copy) % 4 != 0)
    throw std::invalid_argument("flash_attention_forward: out_copy is not 4-byte aligned");
  const std::size_t bytes = flash_forward_shared_bytes(hs);
  const dim3 grid(B * H, (T + kFlashQueryRows - 1) / kFlashQueryRows);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  with_head_size(hs, [&](auto head_size) {
    constexpr int HS = decltype(head_size)::value;
    allow_shared(flash_forward_kernel<HS>, bytes);
    flash_forward_kernel<HS>
        <<<grid, kFlashQueryThreads, bytes, stream>>>(T, C, H, scale, qkv, out, logsumexp, out_copy);
    CUDA_CHECK(cudaGetLastError());
  });
}

void flash_attention_backward(int B, int T, int C, int H, const float* qkv, const float* out, const float* dout,
                              const float* logsumexp, float* dqkv, float* scratch, cudaStream_t stream) {
  const int hs = head_size("flash_attention_backward", B, T, C, H);
  if (B == 0 || T == 0) return;
  require_aligned("flash_attention_backward", "qkv", qkv, 16);
  require_aligned("flash_attention_backward", "dout", dout, 16);
  require_aligned("flash_attention_backward", "dqkv", dqkv, 8);
  if (reinterpret_cast<std::uintptr_t>(scratch) % 256 != 0)
    throw std::invalid_argument("flash_attention_backward: scratch is not 256-byte aligned");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long long rows = static_cast<long long>(B) * H * T;
  flash_delta_kernel<<<static_cast<unsigned>((rows + kDeltaWarps - 1) / kDeltaWarps), kDeltaWarps * 32, 0, stream>>>(
      B, T, C, H, hs, out, dout, scratch);
  CUDA_CHECK(cudaGetLastError());
  bf16* ds_tiles = reinterpret_cast<bf16*>(scratch + delta_floats(B, T, H));
  const std::size_t bytes = flash_backward_shared_bytes(hs), dq_bytes = flash_dq_shared_bytes(hs);
  const dim3 key_grid(B * H, (T + kFlashTile - 1) / kFlashTile);
  const dim3 query_grid(B * H, (T + kFlashQueryRows - 1) / kFlashQueryRows);
  with_head_size(hs, [&](auto head_size) {
    constexpr int HS = decltype(head_size)::value;
    allow_shared(flash_dkdv_kernel<HS>, bytes);
    allow_shared(flash_dq_kernel<HS>, dq_bytes);
    flash_dkdv_kernel<HS>
        <<<key_grid, kFlashKeyThreads, bytes, stream>>>(T, C, H, scale, qkv, dout, logsumexp, scratch, dqkv, ds_tiles);
    CUDA_CHECK(cudaGetLastError());
    flash_dq_kernel<HS><<<query_grid, kFlashQueryThreads, dq_bytes, stream>>>(T, C, H, scale, qkv, ds_tiles, dqkv);
    CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace slurm_train::cuda
