// The transformer's own operations on the GPU, as kernels/cpu/transformer_ops.h defines them on
// the CPU (its plain loops are the reference the tests hold these to): token and position
// embedding, LayerNorm, the residual add, GELU, the cross-entropy of the language-model head, and
// causal multi-head self-attention fused FlashAttention-style (online softmax over key tiles, the
// probabilities recomputed in the backward pass: no T x T matrix in memory).
//
// Host launchers on device pointers, ordered on `stream`. Row-major; a row is one position of one
// sequence (B * T rows). As in the reference, backward passes accumulate into their gradients
// (+=). Every reduction runs in a fixed order on a grid that depends only on the shapes, with no
// float atomics: the same input gives bit-identical output on every run and every GPU model.
// fp32 throughout, except the residual add and GELU, which also take bf16 (stored; arithmetic is
// in float). Shapes the kernels cannot take throw std::invalid_argument before anything runs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace slurm_train::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Tokens must lie in [0, V) (the caller checks them,
// as Gpt::forward does): the kernel reads the row a token names.
void embedding_forward(int B, int T, int C, const std::int32_t* tokens, const float* wte, const float* wpe, float* out,
                       cudaStream_t stream);

// A batch's positions grouped by token (kernels/positions_by_token.h builds them on the host), in
// device memory: count distinct tokens, count + 1 starts into positions.
struct TokenPositions {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* starts = nullptr;
  const std::int32_t* positions = nullptr;
  int count = 0;
};

// dwte[V,C] += the rows of dout[B*T,C] gathered by token, dwpe[T,C] += dout summed over b. One
// thread block per token present (and chunk of columns) adds its positions' rows in position
// order (the reference's order, so the result is bit-identical to it in fp32); no row is written
// by two blocks, so there are no atomics. The tokens must be those of the batch dout is the
// gradient of, each in [0, V), as group_positions_by_token checks them.
void embedding_backward(int B, int T, int C, const TokenPositions& by_token, const float* dout, float* dwte,
                        float* dwpe, cudaStream_t stream);

// out = (x - mean) * rstd * weight + bias over each row of C, with the biased variance and eps
// 1e-5 as torch.nn.LayerNorm; mean[rows] and rstd[rows] are kept for the backward pass. Where
// copy is given, copy = out in bf16 (as cast rounds it), written in the same pass; out may then
// be null, where the bf16 copy is all the products read (the backward pass needs only x, mean
// and rstd).
void layernorm_forward(int rows, int C, const float* x, const float* weight, const float* bias, float* out, float* mean,
                       float* rstd, cudaStream_t stream, __nv_bfloat16* copy = nullptr);

// The floats of scratch layernorm_backward needs for (rows, C): a partial dweight and dbias row
// per chunk of kLayerNormChunkRows rows.
constexpr int kLayerNormChunkRows = 256;
constexpr std::size_t layernorm_backward_scratch_floats(int rows, int C) {
  return 2 * static_cast<std::size_t>(C) *
         static_cast<std::size_t>((rows + kLayerNormChunkRows - 1) / kLayerNormChunkRows);
}

// dx += the gradient of layernorm_forward's out given dout (dx must not be dout); dweight and
// dbias += their gradients. Deterministic: the column sums go first into per-chunk partials (fixed chunks of
// kLayerNormChunkRows rows, in scratch), which a second kernel adds in chunk order.
void layernorm_backward(int rows, int C, const float* x, const float* weight, const float* mean, const float* rstd,
                        const float* dout, float* dx, float* dweight, float* dbias, float* scratch,
                        cudaStream_t stream);

// out[cols] = the column sums of x[rows, cols] (a bias gradient), overwritten; where copy is given,
// copy[rows, cols] = x rounded to bf16 (as cast does), in the same pass over x. Deterministic
// and parallel over rows as well as columns: each block sums 32 columns over a chunk of
// kColumnSumChunkRows rows into scratch (eight row groups, added in order), then a second kernel
// adds the chunks in a fixed order.
constexpr int kColumnSumChunkRows = 128;
constexpr std::size_t column_sums_scratch_floats(int rows, int cols) {
  return static_cast<std::size_t>(cols) *
         static_cast<std::size_t>((rows + kColumnSumChunkRows - 1) / kColumnSumChunkRows);
}
void column_sums(int rows, int cols, const float* x, float* out, float* scratch, cudaStream_t stream,
                 __nv_bfloat16* copy = nullptr);
// gelu_backward over x, dout, dx [rows, cols] (dx may be dout, or null where the bf16 copy is all
// that is wanted), then column_sums of dx (the bias's gradient into out, and dx's bf16 copy where
// copy is given), in one pass over the data: the same bits as the two calls.
void gelu_backward_sums(int rows, int cols, const float* x, const float* dout, float* dx, float* out, float* scratch,
                        cudaStream_t stream, __nv_bfloat16* copy = nullptr);

// out = a + b over n elements (out may be a or b).
template <typename T>
void residual_forward(std::size_t n, const T* a, const T* b, T* out, cudaStream_t stream);

// GELU, the exact erf form (kernels/elementwise.h's formula, as the CPU kernels): out = gelu(x),
// and dx = dout * gelu'(x) (dx may be dout). No bias and no dropout: those are
// elementwise_kernels.h's bias_activation_forward and activation_backward.
template <typename T>
void gelu_forward(std::size_t n, const T* x, T* out, cudaStream_t stream);
// fp32 in, bf16 out: the activation only as the bf16 operand of the next product.
void gelu_forward(std::size_t n, const float* x, __nv_bfloat16* out, cudaStream_t stream);
template <typename T>
void gelu_backward(std::size_t n, const T* x, const T* dout, T* dx, cudaStream_t stream);

// Softmax cross-entropy of logits[rows, V] against targets[rows], one thread block a row (for a
// GPT vocabulary; elementwise_kernels.h's softmax_cross_entropy, one warp a row with label
// smoothing and accuracy, is for few classes). row_loss[r] = logsumexp(logits[r]) -
// logits[r, target], with the row's maximum subtracted first; *loss_sum (device memory) = their
// sum in double, in a fixed order. When dlogits is not null, dlogits = (softmax - onehot(target)) *
// grad_scale, in fp32 (it may be logits itself) or in bf16 (the operand of bf16 products). A
// target outside [0, V) gives its row a NaN loss and NaN gradients (and so a NaN sum) instead of a
// read out of bounds. With `hits`, the rows whose target is the first index of their maximum (the
// CPU kernels' `correct`) are counted too.
struct ArgmaxHits {
  int* row_hit = nullptr;     // [rows] scratch
  long long* hits = nullptr;  // device memory: their count
};
void cross_entropy_forward_backward(int rows, int V, const float* logits, const std::int32_t* targets, float grad_scale,
                                    float* dlogits, float* row_loss, double* loss_sum, cudaStream_t stream,
                                    ArgmaxHits hits = {});
void cross_entropy_forward_backward(int rows, int V, const float* logits, const std::int32_t* targets, float grad_scale,
                                    __nv_bfloat16* dlogits, float* row_loss, double* loss_sum, cudaStream_t stream,
                                    ArgmaxHits hits = {});

// The largest head size (C / H) the attention kernels take: each lane of a warp holds up to
// four of a row's dimensions.
constexpr int kMaxAttentionHeadSize = 128;

// Causal self-attention of H heads over qkv[B*T, 3C] (q in columns [0,C), k in [C,2C), v in
// [2C,3C); head h uses columns h*hs..(h+1)*hs of each, hs = C / H), scores scaled by 1/sqrt(hs):
// out[B*T, C], and logsumexp[B*H*T] (index (b*H + h)*T + t) of each row of scaled scores, which
// the backward pass recomputes the probabilities from. One warp per query; keys in tiles of 32
// in shared memory, with a running maximum and sum (online softmax).
void attention_forward(int B, int T, int C, int H, const float* qkv, float* out, float* logsumexp, cudaStream_t stream);

// dqkv[B*T, 3C] += the gradient of attention_forward given its out, logsumexp and dout[B*T, C].
// Three kernels: D = rowsum(dout * out) per (b,h,t) into scratch[B*H*T]; dk and dv, one warp per
// key looping over the query tiles in order; dq, one warp per query looping over the key tiles.
// Each element of dqkv is written by one thread only: deterministic, with no atomics (the price
// is computing the probabilities twice).
void attention_backward(int B, int T, int C, int H, const float* qkv, const float* out, const float* dout,
                        const float* logsumexp, float* dqkv, float* scratch, cudaStream_t stream);

// One query against a KV cache, for generation: out[C] = softmax(q . k_t / sqrt(hs)) v over the
// positions t in [0, positions) of keys[positions, C] and values[positions, C], head by head (q
// [C]; head h uses columns h*hs..(h+1)*hs). scratch holds H * positions floats (the scores).
// One block per head; the maximum and the sum are reduced in a fixed order.
void attention_decode(int C, int H, int positions, const float* q, const float* keys, const float* values, float* out,
                      float* scratch, cudaStream_t stream);

}  // namespace slurm_train::cuda
