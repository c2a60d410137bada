// Causal multi-head self-attention on tensor cores: FlashAttention-2's method with WMMA bf16
// products and fp32 accumulation, for the bf16 path. The same interface and layout as
// transformer_kernels.h's attention_forward and attention_backward (qkv [B*T, 3C] in fp32, out
// [B*T, C], logsumexp [B*H*T], dqkv += the gradient), which stay the fp32 path and the
// reference these are checked against: Q, K, V, dO and the probabilities are rounded to bf16 as
// operands of the products (about 2^-8 relative), while the softmax, its running maximum and
// sum, and every accumulator are fp32. No T x T matrix is kept: the backward pass recomputes
// the probabilities from the logsumexp, tile by tile (dK and dV by key tile, dQ by query tile;
// each output element written by one thread, no atomics). Device code:
// flash_attention_kernels.cuh.
#pragma once

#include <cuda_runtime.h>

namespace slurm_train::cuda {

// Whether the kernels take C / H as a head size (a multiple of 16 up to 128) with the shared
// memory the current device gives a block (H100/H200: every such head size).
bool flash_attention_supported(int C, int H);

// As attention_forward; throws std::invalid_argument for a shape flash_attention_supported refuses,
// and for qkv (backward: or dout) not 16-byte aligned (a cudaMalloc'd buffer, at a multiple of 4 floats).
void flash_attention_forward(int B, int T, int C, int H, const float* qkv, float* out, float* logsumexp,
                             cudaStream_t stream);

// As attention_backward (scratch: B*H*T floats).
void flash_attention_backward(int B, int T, int C, int H, const float* qkv, const float* out, const float* dout,
                              const float* logsumexp, float* dqkv, float* scratch, cudaStream_t stream);

}  // namespace slurm_train::cuda
