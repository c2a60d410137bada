// Causal multi-head self-attention on tensor cores: FlashAttention-2's method with mma.sync bf16
// products and fp32 accumulation, scores and accumulators kept in registers, for the bf16 path.
// The same layout as transformer_kernels.h's attention_forward and attention_backward (qkv [B*T,
// 3C] in fp32, out [B*T, C], logsumexp [B*H*T]), which stay the fp32 path and the reference
// these are checked against, except that the backward pass writes dqkv instead of adding to it.
// Q, K, V, dO and the probabilities are rounded to bf16 as operands of the products (about 2^-8
// relative), while the softmax, its running maximum and sum, and every accumulator are fp32. The
// forward pass keeps no T x T matrix: the backward pass recomputes the probabilities from the
// logsumexp, tile by tile, by key tile for dK and dV, leaving dS (bf16, T x T / 2 a head) in its
// scratch for dQ = dS K by query tile (each output element written by one thread, no atomics).
// Device code: flash_attention_kernels.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace slurm_train::cuda {

// Whether the kernels take C / H as a head size (a multiple of 16 up to 128) with the shared
// memory the current device gives a block (H100/H200: every such head size).
bool flash_attention_supported(int C, int H);

// As attention_forward, and where out_copy is given, out_copy = out in bf16 (rounded as cast
// rounds it: a product's operand), written in the same pass. Throws std::invalid_argument for a
// shape flash_attention_supported refuses, for qkv (backward: or dout) not 16-byte aligned (a
// cudaMalloc'd buffer, at a multiple of 4 floats), for out (backward: dqkv) not 8-byte aligned,
// and for out_copy not 4-byte aligned.
void flash_attention_forward(int B, int T, int C, int H, const float* qkv, float* out, float* logsumexp,
                             cudaStream_t stream, __nv_bfloat16* out_copy = nullptr);

// The scratch flash_attention_backward needs: B*H*T floats and B*H*n(n+1)/2 bf16 tiles of 64 x
// 64 (n = T / 64 rounded up): 1.06 MiB a (sequence, head) at T = 1024.
std::size_t flash_attention_backward_scratch_floats(int B, int T, int H);

// As attention_backward, but dqkv = the gradient: every element is written, none is read (no
// clearing first). scratch: flash_attention_backward_scratch_floats(B, T, H), 256-byte aligned (a
// cudaMalloc'd buffer).
void flash_attention_backward(int B, int T, int C, int H, const float* qkv, const float* out, const float* dout,
                              const float* logsumexp, float* dqkv, float* scratch, cudaStream_t stream);

}  // namespace slurm_train::cuda
