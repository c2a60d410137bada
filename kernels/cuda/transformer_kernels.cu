// Host side of the transformer's kernels (see transformer_kernels.h): shape checks and launches.
// The device code is transformer_kernels_device.cuh.
#include "kernels/cuda/transformer_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/transformer_kernels_device.cuh"

namespace slurm_train::cuda {
namespace {

using namespace transformer_detail;

// Blocks for a grid-stride loop over n elements: enough to fill any current GPU, no more.
unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>((n + kThreads - 1) / kThreads, 65536)));
}

unsigned ceil_div(long long n, int d) { return static_cast<unsigned>((n + d - 1) / d); }
const dim3 kSumBlock(32, kSumGroups);  // the column sums' blocks

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// The head size, after checking that the attention kernels take these shapes.
int attention_head_size(const char* name, int B, int T, int C, int H) {
  const std::string shape = std::string(name) + ": B=" + std::to_string(B) + ", T=" + std::to_string(T) +
                            ", C=" + std::to_string(C) + ", H=" + std::to_string(H);
  require(B >= 0 && T >= 0 && H > 0 && C > 0 && C % H == 0, shape + ": C must be a positive multiple of H");
  const int hs = C / H;
  require(hs <= kMaxAttentionHeadSize,
          shape + ": head size " + std::to_string(hs) + " above " + std::to_string(kMaxAttentionHeadSize));
  require(static_cast<long long>(B) * H <= 0x7fffffffLL && ceil_div(T, kAttentionWarps) <= 65535,
          shape + ": more blocks than a grid takes");
  return hs;
}

}  // namespace

void embedding_forward(int B, int T, int C, const std::int32_t* tokens, const float* wte, const float* wpe, float* out,
                       cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(B) * T * C;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(T, C, n, tokens, wte, wpe, out);
  CUDA_CHECK(cudaGetLastError());
}

void embedding_backward(int B, int T, int C, const TokenPositions& by_token, const float* dout, float* dwte,
                        float* dwpe, cudaStream_t stream) {
  const std::size_t positions = static_cast<std::size_t>(B) * T;
  require(positions <= 0x7fffffffu, "embedding_backward: B*T above 2^31 - 1");
  require(by_token.count >= 0 && static_cast<std::size_t>(by_token.count) <= positions,
          "embedding_backward: " + std::to_string(by_token.count) + " distinct tokens in " + std::to_string(positions) +
              " positions");
  if (positions == 0 || C == 0) return;
  if (by_token.count > 0) {
    embedding_dwte_kernel<<<dim3(static_cast<unsigned>(by_token.count), ceil_div(C, kThreads)), kThreads, 0, stream>>>(
        C, by_token.tokens, by_token.starts, by_token.positions, dout, dwte);
    CUDA_CHECK(cudaGetLastError());
  }
  embedding_dwpe_kernel<<<blocks_for(static_cast<std::size_t>(T) * C), kThreads, 0, stream>>>(B, T, C, dout, dwpe);
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_forward(int rows, int C, const float* x, const float* weight, const float* bias, float* out, float* mean,
                       float* rstd, cudaStream_t stream, __nv_bfloat16* copy) {
  require(out || copy, "layernorm_forward: neither out nor its bf16 copy given");
  if (rows <= 0) return;
  layernorm_forward_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(rows, C, x, weight, bias, out, mean, rstd,
                                                                            copy);
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward(int rows, int C, const float* x, const float* weight, const float* mean, const float* rstd,
                        const float* dout, float* dx, float* dweight, float* dbias, float* scratch,
                        cudaStream_t stream) {
  if (rows <= 0 || C <= 0) return;
  const unsigned chunks = ceil_div(rows, kLayerNormChunkRows);
  require(chunks <= 65535, "layernorm_backward: more than 65535 chunks of rows");
  layernorm_dx_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(rows, C, x, weight, mean, rstd, dout, dx);
  CUDA_CHECK(cudaGetLastError());
  float* partial_dweight = scratch;
  float* partial_dbias = scratch + static_cast<std::size_t>(chunks) * C;
  layernorm_param_partials_kernel<<<dim3(ceil_div(C, 32), chunks), kSumBlock, 0, stream>>>(
      rows, C, x, mean, rstd, dout, partial_dweight, partial_dbias);
  CUDA_CHECK(cudaGetLastError());
  layernorm_param_sums_kernel<<<ceil_div(C, 32), kSumBlock, 0, stream>>>(static_cast<int>(chunks), C, partial_dweight,
                                                                         partial_dbias, dweight, dbias);
  CUDA_CHECK(cudaGetLastError());
}

namespace {

// column_sums, or with gelu_input gelu_backward_sums.
void sums_of_columns(const char* name, int rows, int cols, const float* x, const float* gelu_input, float* dx,
                     float* out, float* scratch, cudaStream_t stream, __nv_bfloat16* copy) {
  require(rows >= 0 && cols >= 0,
          std::string(name) + ": rows=" + std::to_string(rows) + ", cols=" + std::to_string(cols));
  if (cols == 0) return;
  if (rows == 0) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(cols) * sizeof(float), stream));
    return;
  }
  const unsigned chunks = ceil_div(rows, kColumnSumChunkRows);
  require(chunks <= 65535, std::string(name) + ": more than 65535 chunks of rows");
  const dim3 grid(ceil_div(cols, 32), chunks);
  if (gelu_input)
    column_partials_kernel<true><<<grid, kSumBlock, 0, stream>>>(rows, cols, x, gelu_input, dx, scratch, copy);
  else
    column_partials_kernel<false><<<grid, kSumBlock, 0, stream>>>(rows, cols, x, nullptr, nullptr, scratch, copy);
  CUDA_CHECK(cudaGetLastError());
  column_chunk_sums_kernel<<<ceil_div(cols, 32), kSumBlock, 0, stream>>>(static_cast<int>(chunks), cols, scratch, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void column_sums(int rows, int cols, const float* x, float* out, float* scratch, cudaStream_t stream,
                 __nv_bfloat16* copy) {
  sums_of_columns("column_sums", rows, cols, x, nullptr, nullptr, out, scratch, stream, copy);
}

void gelu_backward_sums(int rows, int cols, const float* x, const float* dout, float* dx, float* out, float* scratch,
                        cudaStream_t stream, __nv_bfloat16* copy) {
  sums_of_columns("gelu_backward_sums", rows, cols, dout, x, dx, out, scratch, stream, copy);
}

template <typename T>
void residual_forward(std::size_t n, const T* a, const T* b, T* out, cudaStream_t stream) {
  if (n == 0) return;
  residual_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, out);
  CUDA_CHECK(cudaGetLastError());
}

// Whether p starts four values on an aligned boundary (the four-at-a-time kernels' accesses).
template <typename T>
bool aligned4(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

template <typename In, typename Out>
void gelu(std::size_t n, const In* x, Out* out, cudaStream_t stream) {
  if (n == 0) return;
  if (aligned4(x) && aligned4(out))
    gelu_forward_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(n, x, out);
  else
    gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, out);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void gelu_forward(std::size_t n, const T* x, T* out, cudaStream_t stream) {
  gelu(n, x, out, stream);
}

void gelu_forward(std::size_t n, const float* x, bf16* out, cudaStream_t stream) { gelu(n, x, out, stream); }

template <typename T>
void gelu_backward(std::size_t n, const T* x, const T* dout, T* dx, cudaStream_t stream) {
  if (n == 0) return;
  if (aligned4(x) && aligned4(dout) && aligned4(dx))
    gelu_backward_x4_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(n, x, dout, dx);
  else
    gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, dout, dx);
  CUDA_CHECK(cudaGetLastError());
}

namespace {
template <typename OutT>
void cross_entropy(int rows, int V, const float* logits, const std::int32_t* targets, float grad_scale, OutT* dlogits,
                   float* row_loss, double* loss_sum, cudaStream_t stream, ArgmaxHits hits) {
  require(rows >= 0 && V > 0, "cross_entropy_forward_backward: rows=" + std::to_string(rows) +
                                  ", V=" + std::to_string(V) + ": needs rows >= 0 and V > 0");
  require(!hits.hits || hits.row_hit, "cross_entropy_forward_backward: a hit count needs its row_hit scratch");
  if (rows > 0) {
    cross_entropy_kernel<OutT><<<rows, kThreads, 0, stream>>>(V, logits, targets, grad_scale, dlogits, row_loss,
                                                              hits.hits ? hits.row_hit : nullptr);
    CUDA_CHECK(cudaGetLastError());
  }
  sum_rows_kernel<<<1, kThreads, 0, stream>>>(rows, row_loss, loss_sum, hits.hits ? hits.row_hit : nullptr, hits.hits);
  CUDA_CHECK(cudaGetLastError());
}
}  // namespace

void cross_entropy_forward_backward(int rows, int V, const float* logits, const std::int32_t* targets, float grad_scale,
                                    float* dlogits, float* row_loss, double* loss_sum, cudaStream_t stream,
                                    ArgmaxHits hits) {
  cross_entropy(rows, V, logits, targets, grad_scale, dlogits, row_loss, loss_sum, stream, hits);
}
void cross_entropy_forward_backward(int rows, int V, const float* logits, const std::int32_t* targets, float grad_scale,
                                    bf16* dlogits, float* row_loss, double* loss_sum, cudaStream_t stream,
                                    ArgmaxHits hits) {
  cross_entropy(rows, V, logits, targets, grad_scale, dlogits, row_loss, loss_sum, stream, hits);
}

void attention_forward(int B, int T, int C, int H, const float* qkv, float* out, float* logsumexp,
                       cudaStream_t stream) {
  const int hs = attention_head_size("attention_forward", B, T, C, H);
  if (B == 0 || T == 0) return;
  const dim3 grid(B * H, ceil_div(T, kAttentionWarps));
  attention_forward_kernel<<<grid, kAttentionThreads, 0, stream>>>(T, C, H, 1.0f / std::sqrt(static_cast<float>(hs)),
                                                                   qkv, out, logsumexp);
  CUDA_CHECK(cudaGetLastError());
}

void attention_backward(int B, int T, int C, int H, const float* qkv, const float* out, const float* dout,
                        const float* logsumexp, float* dqkv, float* scratch, cudaStream_t stream) {
  const int hs = attention_head_size("attention_backward", B, T, C, H);
  if (B == 0 || T == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int rows = B * H * T;
  attention_dsum_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(rows, T, C, H, out, dout, scratch);
  CUDA_CHECK(cudaGetLastError());
  const dim3 grid(B * H, ceil_div(T, kAttentionWarps));
  attention_dkv_kernel<<<grid, kAttentionThreads, 0, stream>>>(T, C, H, scale, qkv, dout, logsumexp, scratch, dqkv);
  CUDA_CHECK(cudaGetLastError());
  attention_dq_kernel<<<grid, kAttentionThreads, 0, stream>>>(T, C, H, scale, qkv, dout, logsumexp, scratch, dqkv);
  CUDA_CHECK(cudaGetLastError());
}

void attention_decode(int C, int H, int positions, const float* q, const float* keys, const float* values, float* out,
                      float* scratch, cudaStream_t stream) {
  const int hs = attention_head_size("attention_decode", 1, positions, C, H);
  require(positions > 0, "attention_decode: no cached position to attend to");
  attention_decode_kernel<<<H, kThreads, 0, stream>>>(C, positions, hs, 1.0f / std::sqrt(static_cast<float>(hs)), q,
                                                      keys, values, out, scratch);
  CUDA_CHECK(cudaGetLastError());
}

template void residual_forward<float>(std::size_t, const float*, const float*, float*, cudaStream_t);
template void residual_forward<bf16>(std::size_t, const bf16*, const bf16*, bf16*, cudaStream_t);
template void gelu_forward<float>(std::size_t, const float*, float*, cudaStream_t);
template void gelu_forward<bf16>(std::size_t, const bf16*, bf16*, cudaStream_t);
template void gelu_backward<float>(std::size_t, const float*, const float*, float*, cudaStream_t);
template void gelu_backward<bf16>(std::size_t, const bf16*, const bf16*, bf16*, cudaStream_t);

}  // namespace slurm_train::cuda
