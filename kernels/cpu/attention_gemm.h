// Causal multi-head self-attention through the kernels' matrix products: per sequence and head,
// the scores Q K^T, the weighted values P V, and in the backward pass dP = dO V^T, dV = P^T dO,
// dQ = dS K, dK = dS^T Q, with the softmax between them as in kernels/cpu/transformer_ops.h
// (the plain-loop reference it is tested against). The same layouts and results: qkv[B,T,3C],
// out[B,T,C], probs[B,H,T,T] (zero above the diagonal); the backward pass writes every element of dqkv (each sequence
// and head owns its slices, so no pass has to clear it first).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace slurm_train::kernels {

// How many of a head's T x T scores the products compute: the causal triangle rounded out to
// whole blocks of queries (12288 of 16384 at T = 128). Each of the six products (two forward,
// four backward) does 2 hs flops per score. Pure.
std::int64_t attention_scores_computed(int T);

void attention_forward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, float* out, float* probs);

// `scratch` holds T*T floats after the call (resized as needed).
void attention_backward_gemm(Kernels<float>& k, int B, int T, int C, int H, const float* qkv, const float* probs,
                             const float* dout, float* dqkv, std::vector<float>& scratch);

}  // namespace slurm_train::kernels
