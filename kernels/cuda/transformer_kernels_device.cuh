// The device code of transformer_kernels.h (kernels and the helpers they use), included by
// transformer_kernels.cu and by test/unit/transformer_kernels_emulated_test.cc, which runs it on
// the CPU emulation of CUDA's execution model (test/unit/cuda_emulation.h). Reductions: within a
// warp by butterfly shuffles (every lane ends with the same bits, as float addition is
// commutative), across warps in warp order; so each result depends only on the shapes, never
// on scheduling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/float_convert.cuh"
#include "kernels/cuda/transformer_kernels.h"
#include "kernels/elementwise.h"

// `#pragma unroll` for nvcc; nothing for a host compiler (the emulated tests').
#if defined(__CUDACC__)
#define ST_UNROLL _Pragma("unroll")
#else
#define ST_UNROLL
#endif

namespace slurm_train::cuda::transformer_detail {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr float kLayerNormEps = 1e-5f;

struct Sum {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Min {
  __device__ int operator()(int a, int b) const { return min(a, b); }
};

template <typename V, typename Op>
__device__ V warp_reduce(V v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
__device__ inline float warp_sum(float v) { return warp_reduce(v, Sum{}); }
__device__ inline float warp_max(float v) { return warp_reduce(v, Max{}); }

// Every thread of the block gets the same total: warps reduce by shuffles, then each thread adds
// the kWarps warp results in warp order. `shared` holds kWarps values.
template <typename V, typename Op>
__device__ V block_reduce(V v, Op op, V* shared) {
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with `shared`
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  V total = shared[0];
  for (int w = 1; w < kWarps; ++w) total = op(total, shared[w]);
  return total;
}

// ---- embedding -----------------------------------------------------------------------------------

__global__ void embedding_forward_kernel(int T, int C, std::size_t n, const std::int32_t* tokens, const float* wte,
                                         const float* wpe, float* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t position = i / C;
    const int c = static_cast<int>(i % C), t = static_cast<int>(position % T);
    out[i] = wte[static_cast<std::int64_t>(tokens[position]) * C + c] + wpe[static_cast<std::int64_t>(t) * C + c];
  }
}

// Block (i, column chunk): row tokens[i] of dwte += the dout rows of the positions that hold it,
// in position order (the reference's).
__global__ void embedding_dwte_kernel(int C, const std::int32_t* tokens, const std::int32_t* starts,
                                      const std::int32_t* positions, const float* dout, float* dwte) {
  const int i = blockIdx.x, c = blockIdx.y * kThreads + threadIdx.x;
  if (c >= C) return;
  float* row = dwte + static_cast<std::int64_t>(tokens[i]) * C;
  float sum = row[c];
  const int end = starts[i + 1];
  for (int k = starts[i]; k < end; ++k) sum += dout[static_cast<std::int64_t>(positions[k]) * C + c];
  row[c] = sum;
}

// One thread per (t, c) of dwpe, adding over b in order.
__global__ void embedding_dwpe_kernel(int B, int T, int C, const float* dout, float* dwpe) {
  const std::size_t n = static_cast<std::size_t>(T) * C;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float sum = dwpe[i];
    for (int b = 0; b < B; ++b) sum += dout[static_cast<std::size_t>(b) * n + i];
    dwpe[i] = sum;
  }
}

// ---- LayerNorm -----------------------------------------------------------------------------------

// One warp per row; where copy is given, out again in bf16 (a product's operand).
__global__ void layernorm_forward_kernel(int rows, int C, const float* x, const float* weight, const float* bias,
                                         float* out, float* mean, float* rstd, __nv_bfloat16* copy) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + static_cast<std::int64_t>(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += 32) sum += xr[c];
  const float m = warp_sum(sum) / C;
  float squares = 0.0f;  // two passes: the variance of x - m, which loses nothing to cancellation
  for (int c = lane; c < C; c += 32) squares += (xr[c] - m) * (xr[c] - m);
  const float s = 1.0f / sqrtf(warp_sum(squares) / C + kLayerNormEps);
  const std::int64_t at = static_cast<std::int64_t>(row) * C;
  for (int c = lane; c < C; c += 32) {
    const float v = (xr[c] - m) * s * weight[c] + bias[c];
    if (out) out[at + c] = v;
    if (copy) copy[at + c] = from_float<__nv_bfloat16>(v);
  }
  if (lane == 0) mean[row] = m, rstd[row] = s;
}

// dx only, one warp per row: dx += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
// dnorm is rounded once (__fmul_rn) and used so in both passes: an FMA of the second pass's
// product with -mean(dnorm) would keep the bits the first pass rounded off, and a row whose terms
// cancel exactly (C = 1: dx is 0) would get rstd times that rounding error.
__global__ void layernorm_dx_kernel(int rows, int C, const float* x, const float* weight, const float* mean,
                                    const float* rstd, const float* dout, float* dx) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const std::int64_t base = static_cast<std::int64_t>(row) * C;
  const float m = mean[row], s = rstd[row];
  float sum_d = 0.0f, sum_dn = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float dnorm = __fmul_rn(dout[base + c], weight[c]);
    sum_d += dnorm;
    sum_dn += dnorm * ((x[base + c] - m) * s);
  }
  const float mean_d = warp_sum(sum_d) / C, mean_dn = warp_sum(sum_dn) / C;
  for (int c = lane; c < C; c += 32) {
    const float norm = (x[base + c] - m) * s;
    dx[base + c] += s * (__fmul_rn(dout[base + c], weight[c]) - mean_d - norm * mean_dn);
  }
}

// Column sums run in blocks of (32 columns, kSumGroups row groups): a warp reads 32 adjacent
// columns of a row (coalesced), and eight warps a block keep enough loads in flight that a sum over
// a few hundred columns is not bound by latency. Each group sums every kSumGroups-th row, and the
// groups' sums are added in group order: the same bits on every run.
constexpr int kSumGroups = 8;

// The sum of the block's kSumGroups partial sums of its thread's column (threadIdx.y the group),
// added in group order, for every thread. All of the block's threads must call it.
__device__ inline float sum_over_groups(float part, float (&parts)[kSumGroups][33]) {
  parts[threadIdx.y][threadIdx.x] = part;
  __syncthreads();
  float sum = parts[0][threadIdx.x];
  for (int g = 1; g < kSumGroups; ++g) sum += parts[g][threadIdx.x];
  return sum;
}

// Block (32, kSumGroups) of chunk blockIdx.y: the chunk's partial dweight and dbias of 32 columns.
__global__ void layernorm_param_partials_kernel(int rows, int C, const float* x, const float* mean, const float* rstd,
                                                const float* dout, float* partial_dweight, float* partial_dbias) {
  __shared__ float dweight_parts[kSumGroups][33], dbias_parts[kSumGroups][33];
  const int col = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
  const int end = min(rows, (chunk + 1) * kLayerNormChunkRows);
  float dweight = 0.0f, dbias = 0.0f;
  if (col < C) {
    for (int r = chunk * kLayerNormChunkRows + threadIdx.y; r < end; r += kSumGroups) {
      const std::int64_t i = static_cast<std::int64_t>(r) * C + col;
      dweight += dout[i] * ((x[i] - mean[r]) * rstd[r]);
      dbias += dout[i];
    }
  }
  dweight = sum_over_groups(dweight, dweight_parts);
  dbias = sum_over_groups(dbias, dbias_parts);
  if (threadIdx.y != 0 || col >= C) return;
  partial_dweight[static_cast<std::int64_t>(chunk) * C + col] = dweight;
  partial_dbias[static_cast<std::int64_t>(chunk) * C + col] = dbias;
}

// Block (32, kSumGroups): dweight and dbias += the chunks' partials of 32 columns.
__global__ void layernorm_param_sums_kernel(int chunks, int C, const float* partial_dweight, const float* partial_dbias,
                                            float* dweight, float* dbias) {
  __shared__ float dweight_parts[kSumGroups][33], dbias_parts[kSumGroups][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum_dweight = 0.0f, sum_dbias = 0.0f;
  if (col < C) {
    for (int chunk = threadIdx.y; chunk < chunks; chunk += kSumGroups) {
      sum_dweight += partial_dweight[static_cast<std::int64_t>(chunk) * C + col];
      sum_dbias += partial_dbias[static_cast<std::int64_t>(chunk) * C + col];
    }
  }
  sum_dweight = sum_over_groups(sum_dweight, dweight_parts);
  sum_dbias = sum_over_groups(sum_dbias, dbias_parts);
  if (threadIdx.y != 0 || col >= C) return;
  dweight[col] += sum_dweight;
  dbias[col] += sum_dbias;
}

// ---- column sums -------------------------------------------------------------------------------

// Block (32, kSumGroups) of chunk blockIdx.y: 32 columns' sums over the chunk's rows. Where copy is
// given, each value is also written there in bf16, so that a gradient that is both a bias's and a
// product's operand is read once. With kGelu, the values summed are first x * gelu'(gelu_input),
// GELU's backward pass as gelu_backward_kernel computes it, in the same pass; they are written to
// dx (which may be x) where dx is given (not where the bf16 copy is all the products read).
template <bool kGelu>
__global__ void column_partials_kernel(int rows, int cols, const float* x, const float* gelu_input, float* dx,
                                       float* partial, __nv_bfloat16* copy) {
  __shared__ float parts[kSumGroups][33];
  const int col = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
  const int end = min(rows, (chunk + 1) * kColumnSumChunkRows);
  float sum = 0.0f;
  if (col < cols) {
    for (int r = chunk * kColumnSumChunkRows + threadIdx.y; r < end; r += kSumGroups) {
      const std::int64_t at = static_cast<std::int64_t>(r) * cols + col;
      float v = x[at];
      if constexpr (kGelu) {
        v *= kernels::gelu_derivative(gelu_input[at]);
        if (dx) dx[at] = v;
      }
      sum += v;
      if (copy) copy[at] = from_float<__nv_bfloat16>(v);
    }
  }
  sum = sum_over_groups(sum, parts);
  if (threadIdx.y == 0 && col < cols) partial[static_cast<std::int64_t>(chunk) * cols + col] = sum;
}

// Block (32, kSumGroups): out = the chunks' partial sums of 32 columns.
__global__ void column_chunk_sums_kernel(int chunks, int cols, const float* partial, float* out) {
  __shared__ float parts[kSumGroups][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (col < cols)
    for (int chunk = threadIdx.y; chunk < chunks; chunk += kSumGroups)
      sum += partial[static_cast<std::int64_t>(chunk) * cols + col];
  sum = sum_over_groups(sum, parts);
  if (threadIdx.y == 0 && col < cols) out[col] = sum;
}

// ---- residual and GELU ---------------------------------------------------------------------------

template <typename T>
__global__ void residual_kernel(std::size_t n, const T* a, const T* b, T* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

template <typename In, typename Out>
__global__ void gelu_forward_kernel(std::size_t n, const In* x, Out* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = from_float<Out>(kernels::gelu(to_float(x[i])));
}

template <typename T>
__global__ void gelu_backward_kernel(std::size_t n, const T* x, const T* dout, T* dx) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dx[i] = from_float<T>(to_float(dout[i]) * kernels::gelu_derivative(to_float(x[i])));
}

// Four values a thread at a time (load4/store4) where every pointer is aligned to four values,
// the last n % 4 one at a time: the same bits as above.
template <typename In, typename Out>
__global__ void gelu_forward_x4_kernel(std::size_t n, const In* x, Out* out) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (std::size_t q = first; q < n / 4; q += stride) {
    float v[4];
    load4(x + 4 * q, v);
    for (float& e : v) e = kernels::gelu(e);
    store4(out + 4 * q, v);
  }
  for (std::size_t i = n / 4 * 4 + first; i < n; i += stride) out[i] = from_float<Out>(kernels::gelu(to_float(x[i])));
}

template <typename T>
__global__ void gelu_backward_x4_kernel(std::size_t n, const T* x, const T* dout, T* dx) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (std::size_t q = first; q < n / 4; q += stride) {
    float v[4], d[4];
    load4(x + 4 * q, v);
    load4(dout + 4 * q, d);
    for (int k = 0; k < 4; ++k) d[k] *= kernels::gelu_derivative(v[k]);
    store4(dx + 4 * q, d);
  }
  for (std::size_t i = n / 4 * 4 + first; i < n; i += stride)
    dx[i] = from_float<T>(to_float(dout[i]) * kernels::gelu_derivative(to_float(x[i])));
}

// ---- cross-entropy -------------------------------------------------------------------------------

// A thread's (then a warp's, a block's) share of a row: its maximum, the sum of exp(z - max) over
// its logits, and the first index holding the maximum (V where it saw none).
struct SoftmaxPart {
  float max, sum;
  int first;
};
constexpr int kNoIndex = 0x7fffffff;
// Commutative (each term's bits do not depend on the order of a and b), so that a butterfly
// leaves every lane with the same bits; a part that saw no logit adds nothing.
__device__ inline SoftmaxPart combine(const SoftmaxPart& a, const SoftmaxPart& b) {
  if (a.sum == 0.0f) return b;
  if (b.sum == 0.0f) return a;
  const float max = fmaxf(a.max, b.max);
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max),
          min(a.max == max ? a.first : kNoIndex, b.max == max ? b.first : kNoIndex)};
}

// One block per row. One read of the row gives its maximum, the first index of it and the sum of
// exp(z - max) (online: the sum is rescaled when the maximum grows); a second read writes the
// gradient, as fp32 or bf16 (OutT), the operand the head's products read.
template <typename OutT>
__global__ void cross_entropy_kernel(int V, const float* logits, const std::int32_t* targets, float grad_scale,
                                     OutT* dlogits, float* row_loss, int* row_hit) {
  __shared__ SoftmaxPart shared[kWarps];
  const std::int64_t row = blockIdx.x;
  const float* z = logits + row * V;
  OutT* dz = dlogits ? dlogits + row * V : nullptr;
  const int target = targets[row];
  if (target < 0 || target >= V) {
    if (threadIdx.x == 0) row_loss[row] = NAN;
    if (threadIdx.x == 0 && row_hit) row_hit[row] = 0;
    if (dz)
      for (int c = threadIdx.x; c < V; c += kThreads) dz[c] = from_float<OutT>(NAN);
    return;
  }
  SoftmaxPart part{-INFINITY, 0.0f, kNoIndex};
  for (int c = threadIdx.x; c < V; c += kThreads) {
    const float x = z[c];
    if (x > part.max) {
      part.sum = part.sum * expf(part.max - x) + 1.0f;
      part.max = x, part.first = c;
    } else {
      part.sum += expf(x - part.max);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const SoftmaxPart other{__shfl_xor_sync(kFullMask, part.max, offset), __shfl_xor_sync(kFullMask, part.sum, offset),
                            __shfl_xor_sync(kFullMask, part.first, offset)};
    part = combine(part, other);
  }
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = part;
  __syncthreads();
  part = shared[0];
  for (int w = 1; w < kWarps; ++w) part = combine(part, shared[w]);
  const float max = part.max, sum = part.sum;
  const float z_target = z[target];
  if (threadIdx.x == 0) {
    row_loss[row] = logf(sum) - (z_target - max);
    if (row_hit) row_hit[row] = part.first == target;
  }
  if (!dz) return;
  if constexpr (std::is_same_v<OutT, float>)
    __syncthreads();  // every thread has read z[target] before dz (which may be z) is written
  const float inv_sum = 1.0f / sum;
  for (int c = threadIdx.x; c < V; c += kThreads) {
    const float p = expf(z[c] - max) * inv_sum;
    dz[c] = from_float<OutT>((c == target ? p - 1.0f : p) * grad_scale);
  }
}

__global__ void sum_rows_kernel(int rows, const float* row_loss, double* loss_sum, const int* row_hit,
                                long long* hits) {
  __shared__ double shared[kWarps];
  __shared__ long long shared_hits[kWarps];
  double sum = 0.0;
  for (int r = threadIdx.x; r < rows; r += kThreads) sum += row_loss[r];
  sum = block_reduce(sum, Sum{}, shared);
  if (threadIdx.x == 0) *loss_sum = sum;
  if (!row_hit) return;
  long long count = 0;
  for (int r = threadIdx.x; r < rows; r += kThreads) count += row_hit[r];
  count = block_reduce(count, Sum{}, shared_hits);
  if (threadIdx.x == 0) *hits = count;
}

// ---- attention -----------------------------------------------------------------------------------
//
// A block of kAttentionWarps warps; each warp owns one row (a query in the forward and dq
// kernels, a key in the dk/dv kernel), lane l holding its dimensions l, l+32, l+64, l+96. The
// other side (keys or queries) streams through shared memory kTile rows at a time, lane j
// computing the dot products of tile row j. Head h of sequence b: q at qkv + b*T*3C + h*hs, k
// and v C and 2C further, rows 3C apart.

constexpr int kAttentionWarps = 8;
constexpr int kAttentionThreads = kAttentionWarps * 32;
constexpr int kTile = 32;
constexpr int kDimsPerLane = kMaxAttentionHeadSize / 32;
// Row stride of a tile: odd, so that lanes reading column d of rows 0..31 hit 32 different banks.
constexpr int kTileStride = kMaxAttentionHeadSize + 1;
static_assert(kMaxAttentionHeadSize % 32 == 0);

using Tile = float[kTile][kTileStride];

// Rows [first, first + count) of a head's q, k, v or dout (`src` at row 0, rows `ld` apart) into
// tile rows 0..count-1, by the whole block; later rows are zeroed, so that a masked (zero)
// weight never multiplies left-over data.
__device__ void load_tile(Tile& tile, const float* src, std::int64_t ld, int first, int count, int hs) {
  for (int i = threadIdx.x; i < kTile * hs; i += blockDim.x) {
    const int r = i / hs, d = i % hs;
    tile[r][d] = r < count ? src[(first + r) * ld + d] : 0.0f;
  }
}

// One row of hs values, by one warp.
__device__ void load_row(float* dst, const float* src, int hs) {
  for (int d = threadIdx.x % 32; d < hs; d += 32) dst[d] = src[d];
}

__device__ float dot(const float* a, const float* b, int hs) {
  float sum = 0.0f;
  for (int d = 0; d < hs; ++d) sum += a[d] * b[d];
  return sum;
}

// acc[i] += weight of tile row r (lane r's `weight`) * tile[r][lane + 32 i], for rows [from, to).
__device__ void add_weighted_rows(float (&acc)[kDimsPerLane], float weight, const Tile& tile, int from, int to,
                                  int hs) {
  const int lane = threadIdx.x % 32;
  for (int r = from; r < to; ++r) {
    const float w = __shfl_sync(kFullMask, weight, r);
    ST_UNROLL
    for (int i = 0; i < kDimsPerLane; ++i)
      if (lane + 32 * i < hs) acc[i] += w * tile[r][lane + 32 * i];
  }
}

// acc[i] * factor into (or, accumulating, onto) row[lane + 32 i].
__device__ void store_row(float* row, const float (&acc)[kDimsPerLane], float factor, bool accumulate, int hs) {
  const int lane = threadIdx.x % 32;
  ST_UNROLL
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) row[d] = accumulate ? row[d] + acc[i] * factor : acc[i] * factor;
  }
}

// Block (b*H + h, y): queries y*kAttentionWarps + warp. Key tiles up to the block's last query;
// a warp skips the tiles wholly after its query.
__global__ void attention_forward_kernel(int T, int C, int H, float scale, const float* qkv, float* out,
                                         float* logsumexp) {
  __shared__ Tile k_tile, v_tile;
  __shared__ float q_rows[kAttentionWarps][kMaxAttentionHeadSize];
  const int hs = C / H, bh = blockIdx.x, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t ld = 3 * static_cast<std::int64_t>(C);
  const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
  const int first = blockIdx.y * kAttentionWarps, last = min(T, first + kAttentionWarps) - 1;
  const int t = first + warp;
  const bool active = t < T;
  if (active) load_row(q_rows[warp], q + t * ld, hs);
  float max = -INFINITY, sum = 0.0f, acc[kDimsPerLane] = {};
  for (int k0 = 0; k0 <= last; k0 += kTile) {
    __syncthreads();  // everyone is done with the previous tile
    load_tile(k_tile, q + C, ld, k0, min(kTile, T - k0), hs);
    load_tile(v_tile, q + 2 * C, ld, k0, min(kTile, T - k0), hs);
    __syncthreads();
    if (!active || k0 > t) continue;
    const int keys = min(kTile, t - k0 + 1);  // the causal mask: keys k0..t of this tile
    const float s = lane < keys ? dot(q_rows[warp], k_tile[lane], hs) * scale : -INFINITY;
    // Finite: every tile a warp works on holds key k0 <= t. On the first tile max was -inf and
    // the correction is 0.
    const float new_max = fmaxf(max, warp_max(s));
    const float p = expf(s - new_max), correction = expf(max - new_max);
    sum = sum * correction + warp_sum(p);
    ST_UNROLL
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= correction;
    add_weighted_rows(acc, p, v_tile, 0, keys, hs);
    max = new_max;
  }
  if (!active) return;
  store_row(out + (static_cast<std::int64_t>(b) * T + t) * C + h * hs, acc, 1.0f / sum, false, hs);
  if (lane == 0) logsumexp[static_cast<std::int64_t>(bh) * T + t] = max + logf(sum);
}

// dsum[(b*H + h)*T + t] = dout . out over the head's hs columns: the sum over keys of p * dp
// that the softmax's gradient subtracts. One warp per row.
__global__ void attention_dsum_kernel(int rows, int T, int C, int H, const float* out, const float* dout, float* dsum) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int hs = C / H, bh = row / T, t = row % T, b = bh / H, h = bh % H;
  const std::int64_t base = (static_cast<std::int64_t>(b) * T + t) * C + h * hs;
  float sum = 0.0f;
  for (int d = threadIdx.x % 32; d < hs; d += 32) sum += dout[base + d] * out[base + d];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) dsum[row] = sum;
}

// dq: as the forward kernel, one warp per query over the key tiles, with
// ds = p * (dout . v - dsum), p = exp(s - logsumexp), and dq = scale * sum over keys of ds * k.
__global__ void attention_dq_kernel(int T, int C, int H, float scale, const float* qkv, const float* dout,
                                    const float* logsumexp, const float* dsum, float* dqkv) {
  __shared__ Tile k_tile, v_tile;
  __shared__ float q_rows[kAttentionWarps][kMaxAttentionHeadSize], dout_rows[kAttentionWarps][kMaxAttentionHeadSize];
  const int hs = C / H, bh = blockIdx.x, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t ld = 3 * static_cast<std::int64_t>(C);
  const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
  const int first = blockIdx.y * kAttentionWarps, last = min(T, first + kAttentionWarps) - 1;
  const int t = first + warp;
  const bool active = t < T;
  float lse = 0.0f, ds_sum = 0.0f, acc[kDimsPerLane] = {};
  if (active) {
    load_row(q_rows[warp], q + t * ld, hs);
    load_row(dout_rows[warp], dout + (static_cast<std::int64_t>(b) * T + t) * C + h * hs, hs);
    lse = logsumexp[static_cast<std::int64_t>(bh) * T + t];
    ds_sum = dsum[static_cast<std::int64_t>(bh) * T + t];
  }
  for (int k0 = 0; k0 <= last; k0 += kTile) {
    __syncthreads();
    load_tile(k_tile, q + C, ld, k0, min(kTile, T - k0), hs);
    load_tile(v_tile, q + 2 * C, ld, k0, min(kTile, T - k0), hs);
    __syncthreads();
    if (!active || k0 > t) continue;
    const int keys = min(kTile, t - k0 + 1);
    float ds = 0.0f;
    if (lane < keys) {
      const float p = expf(dot(q_rows[warp], k_tile[lane], hs) * scale - lse);
      ds = p * (dot(dout_rows[warp], v_tile[lane], hs) - ds_sum);
    }
    add_weighted_rows(acc, ds, k_tile, 0, keys, hs);
  }
  if (!active) return;
  store_row(dqkv + (static_cast<std::int64_t>(b) * T + t) * ld + h * hs, acc, scale, true, hs);
}

// dk and dv: block (b*H + h, y) owns keys y*kAttentionWarps + warp, one warp each, and walks the
// query tiles from its first key on (earlier queries see none of its keys) in order; lane i
// computes p and ds for query q0 + i, and the warp adds dv += p * dout, dk += scale * ds * q.
__global__ void attention_dkv_kernel(int T, int C, int H, float scale, const float* qkv, const float* dout,
                                     const float* logsumexp, const float* dsum, float* dqkv) {
  __shared__ Tile q_tile, dout_tile;
  __shared__ float k_rows[kAttentionWarps][kMaxAttentionHeadSize], v_rows[kAttentionWarps][kMaxAttentionHeadSize];
  __shared__ float lse_tile[kTile], dsum_tile[kTile];
  const int hs = C / H, bh = blockIdx.x, b = bh / H, h = bh % H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t ld = 3 * static_cast<std::int64_t>(C);
  const float* q = qkv + static_cast<std::int64_t>(b) * T * ld + h * hs;
  const float* dout_head = dout + static_cast<std::int64_t>(b) * T * C + h * hs;
  const float* lse_head = logsumexp + static_cast<std::int64_t>(bh) * T;
  const float* dsum_head = dsum + static_cast<std::int64_t>(bh) * T;
  const int first = blockIdx.y * kAttentionWarps;
  const int j = first + warp;
  const bool active = j < T;
  if (active) {
    load_row(k_rows[warp], q + C + j * ld, hs);
    load_row(v_rows[warp], q + 2 * C + j * ld, hs);
  }
  float dk[kDimsPerLane] = {}, dv[kDimsPerLane] = {};
  for (int q0 = first; q0 < T; q0 += kTile) {
    const int count = min(kTile, T - q0);
    __syncthreads();
    load_tile(q_tile, q, ld, q0, count, hs);
    load_tile(dout_tile, dout_head, C, q0, count, hs);
    if (const int i = threadIdx.x; i < kTile) {
      lse_tile[i] = i < count ? lse_head[q0 + i] : 0.0f;
      dsum_tile[i] = i < count ? dsum_head[q0 + i] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    // Queries q0 + i >= j see key j; q0 >= first > j - kTile, so every tile has some.
    const int from = max(0, j - q0);
    float p = 0.0f, ds = 0.0f;
    if (lane >= from && lane < count) {
      p = expf(dot(q_tile[lane], k_rows[warp], hs) * scale - lse_tile[lane]);
      ds = p * (dot(dout_tile[lane], v_rows[warp], hs) - dsum_tile[lane]);
    }
    add_weighted_rows(dv, p, dout_tile, from, count, hs);
    add_weighted_rows(dk, ds, q_tile, from, count, hs);
  }
  if (!active) return;
  float* row = dqkv + (static_cast<std::int64_t>(b) * T + j) * ld + h * hs;
  store_row(row + C, dk, scale, true, hs);
  store_row(row + 2 * C, dv, 1.0f, true, hs);
}

// One block per head: scores by key (a thread per key), their maximum and sum, then one thread
// per output dimension sums over the keys in order.
__global__ void attention_decode_kernel(int C, int positions, int hs, float scale, const float* q, const float* keys,
                                        const float* values, float* out, float* scores) {
  __shared__ float shared[kWarps];
  __shared__ float query[kMaxAttentionHeadSize];
  const int h = blockIdx.x;
  float* s = scores + static_cast<std::int64_t>(h) * positions;
  for (int i = threadIdx.x; i < hs; i += kThreads) query[i] = q[h * hs + i];
  __syncthreads();
  float max = -INFINITY;
  for (int t = threadIdx.x; t < positions; t += kThreads) {
    const float* k = keys + static_cast<std::int64_t>(t) * C + h * hs;
    float dot = 0.0f;
    for (int i = 0; i < hs; ++i) dot += query[i] * k[i];
    s[t] = dot * scale;
    max = fmaxf(max, s[t]);
  }
  max = block_reduce(max, Max{}, shared);
  float sum = 0.0f;
  for (int t = threadIdx.x; t < positions; t += kThreads) {
    s[t] = expf(s[t] - max);
    sum += s[t];
  }
  sum = block_reduce(sum, Sum{}, shared);  // its barrier also orders the writes of s before the reads below
  const float inv_sum = 1.0f / sum;
  for (int i = threadIdx.x; i < hs; i += kThreads) {
    float acc = 0.0f;
    for (int t = 0; t < positions; ++t) acc += s[t] * values[static_cast<std::int64_t>(t) * C + h * hs + i];
    out[h * hs + i] = acc * inv_sum;
  }
}

}  // namespace slurm_train::cuda::transformer_detail
