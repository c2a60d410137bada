// The device code of flash_attention.h: causal self-attention on tensor cores (WMMA, bf16
// operands, fp32 accumulation), FlashAttention-2's method. Included by flash_attention.cu, and
// by test/unit/flash_attention_emulated_test.cc, which runs it on a CPU emulation of CUDA's
// execution model (test/unit/cuda_emulation.h); so it uses only what that emulation provides:
// WMMA through its API (never a fragment's elements), __syncthreads, __syncwarp,
// __shfl_xor_sync, dynamic shared memory through FLASH_DYNAMIC_SHARED, and no static __shared__.
//
// A block takes a tile of kFlashTile queries (or keys) of one (sequence, head) and its four warps
// 16 rows each. Q, K, V and dO are read in fp32 and rounded to bf16 as they are staged in shared
// memory; scores, probabilities, running maxima and sums, and every accumulator are fp32; the
// probabilities (and dS) are rounded to bf16 only as operands of the next product. Each output
// element is written by one thread (no atomics): the backward pass is two kernels, dK/dV by key
// tile over the query tiles, recomputing P from the forward pass's logsumexp and writing each
// tile's dS (bf16, the operand dQ's product reads) to global scratch, then dQ = dS K by query
// tile over those dS tiles. Their accumulators stay in WMMA fragments (registers: the head size
// is every kernel's template argument, so that every fragment index and tile loop is a
// constant) rather than in shared memory, which leaves room for two blocks on a multiprocessor;
// the forward pass's output is rescaled row by row as the online softmax goes, which needs its
// elements, so it stays in shared memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

// `#pragma unroll` for nvcc (fragment arrays indexed by constants stay in registers); nothing for
// a host compiler (the emulated tests').
#if defined(__CUDACC__)
#define FLASH_UNROLL _Pragma("unroll")
#else
#define FLASH_UNROLL
#endif

namespace slurm_train::cuda::flash_detail {

constexpr int kFlashTile = 64;                  // rows of a block's tile, keys of a step
constexpr int kFlashWarps = kFlashTile / 16;    // 16 rows each
constexpr int kFlashThreads = kFlashWarps * 32;
constexpr unsigned kFlashFullMask = 0xffffffffu;
// Row strides of the shared tiles, padded past a multiple of 128 bytes so that the 16 rows a
// fragment load reads start in different banks (WMMA still needs 16-byte multiples and 32-byte
// aligned fragments, which these keep): bf16 [64][hs] tiles hs + 8, bf16 [64][64] tiles 72,
// fp32 [64][64] tiles 68, fp32 [64][hs] tiles hs + 4.
constexpr int kLdP = kFlashTile + 8, kLdS = kFlashTile + 4;
__host__ __device__ constexpr int flash_ld_half(int hs) { return hs + 8; }
__host__ __device__ constexpr int flash_ld_float(int hs) { return hs + 4; }

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragACol = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Bytes of dynamic shared memory each kernel needs for head size hs.
constexpr std::size_t flash_forward_shared_bytes(int hs) {
  return 2 * (3 * kFlashTile * flash_ld_half(hs) + kFlashTile * kLdP) +
         4 * (kFlashTile * kLdS + kFlashTile * flash_ld_float(hs) + 3 * kFlashTile);
}
// Both backward kernels: four bf16 [64][hs] tiles, P and dS in bf16, S and dP in fp32 (which
// also stage the accumulators on their way out: [64][hs + 4] fp32 fits in them for hs <= 128),
// and a query tile's logsumexp and D.
constexpr std::size_t flash_backward_shared_bytes(int hs) {
  return 2 * (4 * kFlashTile * flash_ld_half(hs) + 2 * kFlashTile * kLdP) + 4 * (2 * kFlashTile * kLdS + 2 * kFlashTile);
}
static_assert(kFlashTile * flash_ld_float(128) <= 2 * kFlashTile * kLdS, "the accumulators' staging fits S and dP");
// The dQ kernel: a bf16 key tile and the fp32 staging of its output.
constexpr std::size_t flash_dq_shared_bytes(int hs) {
  return 2 * kFlashTile * flash_ld_half(hs) + 4 * kFlashTile * flash_ld_float(hs);
}

// The dS tiles the dK/dV kernel leaves for the dQ kernel: per (sequence, head), the tiles
// (query tile i, key tile j <= i) in the order (0,0), (1,0), (1,1), (2,0)..., each [64 keys][64
// queries] bf16 (dS^T, as the dK/dV kernel holds it; 8 KiB, so every tile is 256-byte aligned
// after an aligned start). Rows and columns past T hold 0.
constexpr int kFlashTileElements = kFlashTile * kFlashTile;
__host__ __device__ constexpr std::int64_t flash_ds_tiles(int T) {
  const std::int64_t n = (T + kFlashTile - 1) / kFlashTile;
  return n * (n + 1) / 2;
}
__host__ __device__ constexpr std::int64_t flash_ds_tile_index(int T, int bh, int i, int j) {
  return static_cast<std::int64_t>(bh) * flash_ds_tiles(T) + static_cast<std::int64_t>(i) * (i + 1) / 2 + j;
}

// Calls f(std::integral_constant<int, HS>{}) for head size hs: the kernels' template argument. Throws std::invalid_argument for a head size they do not take.
template <typename F>
void with_head_size(int hs, F&& f) {
  switch (hs) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 48: return f(std::integral_constant<int, 48>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 80: return f(std::integral_constant<int, 80>{});
    case 96: return f(std::integral_constant<int, 96>{});
    case 112: return f(std::integral_constant<int, 112>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: throw std::invalid_argument("flash attention: head size " + std::to_string(hs) +
                                         ": expected a multiple of 16 up to 128");
  }
}

// rows [row0, row0 + kFlashTile) of one (b, h)'s q, k or v (column offset `part` * C) or of an
// [B*T, C] tensor (row_stride C, part 0), head h's HS columns, rounded to bf16; rows past T are
// 0. Four columns a load: the rows and columns are multiples of 16 floats from a 16-byte aligned
// start (flash_attention.cu checks the pointers).
template <int HS>
__device__ inline void stage_tile(const float* rows, std::int64_t row_stride, int column, int row0, int T,
                                  bf16* tile) {
  constexpr int ld = flash_ld_half(HS), quads = HS / 4;
  for (int i = threadIdx.x; i < kFlashTile * quads; i += kFlashThreads) {
    const int r = i / quads, d = i % quads * 4, t = row0 + r;
    float4 x{0.0f, 0.0f, 0.0f, 0.0f};
    if (t < T) x = *reinterpret_cast<const float4*>(rows + static_cast<std::int64_t>(t) * row_stride + column + d);
    bf16* out = tile + r * ld + d;
    out[0] = __float2bfloat16(x.x), out[1] = __float2bfloat16(x.y), out[2] = __float2bfloat16(x.z),
    out[3] = __float2bfloat16(x.w);
  }
}

// The next tile of stage_tile's rows, loaded into registers while the current tile's products
// run, and staged in shared memory once they are done: the loads' latency is hidden behind them
// (a block's warps otherwise all wait on global memory at every tile). Each thread holds the
// float4 loads stage_tile would do, HS / 8 of them; over head size 64 the two held tiles would
// take more registers than a thread has beside the accumulators, so the tile is then read when
// it is staged, as stage_tile reads it.
template <int HS>
struct NextTile {
  static constexpr bool kHeld = HS <= 64;
  static constexpr int kQuads = kFlashTile * HS / 4 / kFlashThreads;
  static_assert(kFlashTile * HS / 4 % kFlashThreads == 0, "a tile's float4 loads spread evenly over the threads");
  float4 x[kHeld ? kQuads : 1];
  const float* rows = nullptr;
  std::int64_t row_stride = 0;
  int column = 0, row0 = 0, T = 0;

  __device__ void load(const float* rows_, std::int64_t row_stride_, int column_, int row0_, int T_) {
    rows = rows_, row_stride = row_stride_, column = column_, row0 = row0_, T = T_;
    if constexpr (kHeld) {
      constexpr int quads = HS / 4;
      FLASH_UNROLL
      for (int j = 0; j < kQuads; ++j) {
        const int i = threadIdx.x + j * kFlashThreads, r = i / quads, d = i % quads * 4, t = row0 + r;
        x[j] = t < T ? *reinterpret_cast<const float4*>(rows + static_cast<std::int64_t>(t) * row_stride + column + d)
                     : float4{0.0f, 0.0f, 0.0f, 0.0f};
      }
    }
  }
  __device__ void stage(bf16* tile) const {
    if constexpr (kHeld) {
      constexpr int ld = flash_ld_half(HS), quads = HS / 4;
      FLASH_UNROLL
      for (int j = 0; j < kQuads; ++j) {
        const int i = threadIdx.x + j * kFlashThreads, r = i / quads, d = i % quads * 4;
        bf16* out = tile + r * ld + d;
        out[0] = __float2bfloat16(x[j].x), out[1] = __float2bfloat16(x[j].y), out[2] = __float2bfloat16(x[j].z),
        out[3] = __float2bfloat16(x[j].w);
      }
    } else {
      stage_tile<HS>(rows, row_stride, column, row0, T, tile);
    }
  }
};

// out[16 x 64] (fp32, ld kLdS) = a[16 x hs] b^T, b [64 x hs] (both bf16 tiles): scores of 16 rows
// against a tile of 64.
__device__ inline void rows_by_tile_transposed(const bf16* a, const bf16* b, int hs, float* out) {
  const int ld = flash_ld_half(hs);
  FragAcc acc[4];
  for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[j], 0.0f);
  for (int d0 = 0; d0 < hs; d0 += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + d0, ld);
    for (int j = 0; j < 4; ++j) {
      FragBCol fb;  // b^T's (d, n) is b[n * ld + d]
      wmma::load_matrix_sync(fb, b + j * 16 * ld + d0, ld);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
  }
  for (int j = 0; j < 4; ++j) wmma::store_matrix_sync(out + j * 16, acc[j], kLdS, wmma::mem_row_major);
}

// acc[16 x hs] (fp32, ld flash_ld_float) += p[16 x 64] (bf16, ld kLdP) b[64 x hs] (a bf16 tile).
// p's four fragments are read once, for every column block of the output.
__device__ inline void accumulate_rows_by_tile(const bf16* p, const bf16* b, int hs, float* acc) {
  const int ld = flash_ld_half(hs), ldo = flash_ld_float(hs);
  FragA fa[kFlashTile / 16];
  FLASH_UNROLL
  for (int k = 0; k < kFlashTile / 16; ++k) wmma::load_matrix_sync(fa[k], p + k * 16, kLdP);
  for (int d0 = 0; d0 < hs; d0 += 16) {
    FragAcc c;
    wmma::load_matrix_sync(c, acc + d0, ldo, wmma::mem_row_major);
    FLASH_UNROLL
    for (int k = 0; k < kFlashTile / 16; ++k) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + k * 16 * ld + d0, ld);
      wmma::mma_sync(c, fa[k], fb, c);
    }
    wmma::store_matrix_sync(acc + d0, c, ldo, wmma::mem_row_major);
  }
}

// acc[j] (16 x 16 fragments, together 16 x HS) += p[16 x 64] (bf16, ld kLdP) b[64 x HS] (a bf16
// tile), each fragment's terms added in k order, as accumulate_rows_by_tile adds them.
template <int HS>
__device__ inline void accumulate_fragments_by_tile(const bf16* p, const bf16* b, FragAcc (&acc)[HS / 16]) {
  constexpr int ld = flash_ld_half(HS);
  for (int k = 0; k < kFlashTile; k += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, p + k, kLdP);
    FLASH_UNROLL
    for (int j = 0; j < HS / 16; ++j) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + k * ld + j * 16, ld);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
  }
}

// Each warp's 16 rows of acc into rows warp*16.. of `staging` ([64][HS + 4] fp32).
template <int HS>
__device__ inline void stage_fragments(const FragAcc (&acc)[HS / 16], float* staging) {
  constexpr int ldo = flash_ld_float(HS);
  const int warp = threadIdx.x / 32;
  FLASH_UNROLL
  for (int j = 0; j < HS / 16; ++j)
    wmma::store_matrix_sync(staging + warp * 16 * ldo + j * 16, acc[j], ldo, wmma::mem_row_major);
}

// grid (B * H, query tiles). out[B*T, C] = attention, logsumexp[(b*H + h)*T + t] of the scaled
// scores, as attention_forward.
template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(int T, int C, int H, float scale, const float* qkv, float* out, float* logsumexp) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int hs = HS, ldh = flash_ld_half(HS), ldo = flash_ld_float(HS);
  bf16* q = reinterpret_cast<bf16*>(shared);
  bf16* k = q + kFlashTile * ldh;
  bf16* v = k + kFlashTile * ldh;
  bf16* p = v + kFlashTile * ldh;                          // [64][64]
  float* s = reinterpret_cast<float*>(p + kFlashTile * kLdP);  // [64][64]
  float* o = s + kFlashTile * kLdS;                        // [64][hs]
  float* row_max = o + kFlashTile * ldo;
  float* row_sum = row_max + kFlashTile;
  float* row_scale = row_sum + kFlashTile;
  // The last query tiles (the most keys) first: the short blocks then fill the grid's tail.
  const int bh = blockIdx.x, b = bh / H, h = bh % H, q0 = (gridDim.y - 1 - blockIdx.y) * kFlashTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  stage_tile<HS>(rows, stride, h * hs, q0, T, q);
  for (int i = threadIdx.x; i < kFlashTile * ldo; i += kFlashThreads) o[i] = 0.0f;
  for (int r = threadIdx.x; r < kFlashTile; r += kFlashThreads) row_max[r] = -INFINITY, row_sum[r] = 0.0f;
  const int key_end = q0 + kFlashTile < T ? q0 + kFlashTile : T;  // causal: keys up to the tile's last query
  // Each warp's rows: scores s, probabilities p, output o, and their running max and sum.
  float* ws = s + warp * 16 * kLdS;
  bf16* wp = p + warp * 16 * kLdP;
  float* wo = o + warp * 16 * ldo;
  NextTile<HS> next_k, next_v;
  next_k.load(rows, stride, C + h * hs, 0, T);
  next_v.load(rows, stride, 2 * C + h * hs, 0, T);
  for (int k0 = 0; k0 < key_end; k0 += kFlashTile) {
    __syncthreads();  // the previous tile's k and v are no longer read
    next_k.stage(k);
    next_v.stage(v);
    if (k0 + kFlashTile < key_end) {
      next_k.load(rows, stride, C + h * hs, k0 + kFlashTile, T);
      next_v.load(rows, stride, 2 * C + h * hs, k0 + kFlashTile, T);
    }
    __syncthreads();
    rows_by_tile_transposed(q + warp * 16 * ldh, k, hs, ws);
    __syncwarp();
    {  // online softmax: two lanes a row, the even and the odd keys. Lane (r, half) reads
       // column 2 ((c + r / 8) % 32) + half at step c: with S's row stride of 68 floats (4 banks
       // on) the 32 lanes then read 32 different banks, and a row's two lanes write the two
       // halves of one 4-byte word of P, 16 words in 16 banks: no bank conflicts.
      const int r = lane / 2, half = lane % 2, row = warp * 16 + r, tq = q0 + row, rotation = r / 8;
      const float* sr = ws + r * kLdS;
      const float old_max = row_max[row], old_sum = row_sum[row];
      const auto scaled = [&](int col) {  // the scaled score, -inf where the causal mask or T cuts it
        const int tk = k0 + col;
        return tk <= tq && tk < T ? sr[col] * scale : -INFINITY;
      };
      float tile_max = -INFINITY;
      for (int c = 0; c < 32; ++c) tile_max = fmaxf(tile_max, scaled(2 * ((c + rotation) % 32) + half));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFlashFullMask, tile_max, 1));
      const float new_max = fmaxf(old_max, tile_max);
      float sum = 0.0f;
      bf16* pr = wp + r * kLdP;
      for (int c = 0; c < 32; ++c) {
        const int col = 2 * ((c + rotation) % 32) + half;
        const float e = new_max == -INFINITY ? 0.0f : expf(scaled(col) - new_max);
        pr[col] = __float2bfloat16(e);
        sum += e;
      }
      sum += __shfl_xor_sync(kFlashFullMask, sum, 1);
      const float rescale = old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
      __syncwarp();  // both lanes of a row have read its old max and sum
      if (half == 0) {
        row_max[row] = new_max;
        row_sum[row] = old_sum * rescale + sum;
        row_scale[row] = rescale;
      }
    }
    __syncwarp();
    for (int i = lane; i < 16 * hs; i += 32) wo[(i / hs) * ldo + i % hs] *= row_scale[warp * 16 + i / hs];
    __syncwarp();
    accumulate_rows_by_tile(wp, v, hs, wo);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kFlashTile * hs; i += kFlashThreads) {
    const int r = i / hs, t = q0 + r;
    if (t < T) out[(static_cast<std::int64_t>(b) * T + t) * C + h * hs + i % hs] = o[r * ldo + i % hs] / row_sum[r];
  }
  for (int r = threadIdx.x; r < kFlashTile; r += kFlashThreads)
    if (q0 + r < T) logsumexp[static_cast<std::int64_t>(bh) * T + q0 + r] = row_max[r] + logf(row_sum[r]);
}

// D[(b*H + h)*T + t] = sum over head h's columns of dout * out, one warp per (b, h, t): its
// lanes read the row's adjacent columns (one thread a row would read 32 rows' columns apart).
constexpr int kDeltaWarps = 8;
__global__ void flash_delta_kernel(int B, int T, int C, int H, int hs, const float* out, const float* dout, float* delta) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kDeltaWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= static_cast<std::int64_t>(B) * H * T) return;  // the whole warp: i is the warp's
  const int t = static_cast<int>(i % T), bh = static_cast<int>(i / T), b = bh / H, h = bh % H;
  const std::int64_t at = (static_cast<std::int64_t>(b) * T + t) * C + h * hs;
  float sum = 0.0f;
  for (int d = lane; d < hs; d += 32) sum += dout[at + d] * out[at + d];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFlashFullMask, sum, offset);
  if (lane == 0) delta[i] = sum;
}

// The recomputed probabilities and dS of one warp's 16 rows against a tile of 64, in place:
// on entry `ps` holds the scores and `dps` dP (both fp32, ld 64); on exit `p16` holds P and `ds16`
// dS = P (dP - D) in bf16 (ld kLdP; the fp32 ones kLdS). by_key: the warp's rows are keys (P^T:
// the 64 columns are queries), else queries. row0/col0: the first row's and column's position;
// lse and delta are indexed by query position minus q_base. The lanes take a row's adjacent
// columns, so that their shared-memory accesses fall in different banks.
__device__ inline void probabilities_and_ds(bool by_key, int row0, int col0, int T, float scale, const float* lse,
                                            const float* delta, int q_base, float* ps, const float* dps, bf16* p16,
                                            bf16* ds16) {
  const int lane = threadIdx.x % 32;
  for (int e = 0; e < 32; ++e) {
    const int r = e / 2, col = e % 2 * 32 + lane, i = r * kLdS + col, j = r * kLdP + col;
    const int row_pos = row0 + r, col_pos = col0 + col;
    const int tq = by_key ? col_pos : row_pos, tk = by_key ? row_pos : col_pos;
    float pv = 0.0f, dsv = 0.0f;
    if (tk <= tq && tq < T && tk < T) {
      pv = expf(ps[i] * scale - lse[tq - q_base]);
      dsv = pv * (dps[i] - delta[tq - q_base]);
    }
    p16[j] = __float2bfloat16(pv);
    ds16[j] = __float2bfloat16(dsv);
  }
}

// grid (B * H, key tiles): dK and dV of the block's keys over the query tiles from its own on.
template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_dkdv_kernel(int T, int C, int H, float scale, const float* qkv, const float* dout, const float* logsumexp,
                      const float* delta, float* dqkv, bf16* ds_tiles) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int hs = HS, ldh = flash_ld_half(HS), ldo = flash_ld_float(HS);
  bf16* k = reinterpret_cast<bf16*>(shared);
  bf16* v = k + kFlashTile * ldh;
  bf16* q = v + kFlashTile * ldh;
  bf16* dout16 = q + kFlashTile * ldh;
  bf16* p16 = dout16 + kFlashTile * ldh;                    // [64][64]
  bf16* ds16 = p16 + kFlashTile * kLdP;                     // [64][64]
  float* s = reinterpret_cast<float*>(ds16 + kFlashTile * kLdP);  // [64][64]
  float* dp = s + kFlashTile * kLdS;                        // [64][64]
  float* lse = dp + kFlashTile * kLdS;                      // [64], this query tile's
  float* dl = lse + kFlashTile;                             // [64]
  const int bh = blockIdx.x, b = bh / H, h = bh % H, k0 = blockIdx.y * kFlashTile;
  const int warp = threadIdx.x / 32;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  const float* drows = dout + static_cast<std::int64_t>(b) * T * C;
  stage_tile<HS>(rows, stride, C + h * hs, k0, T, k);
  stage_tile<HS>(rows, stride, 2 * C + h * hs, k0, T, v);
  FragAcc dk[HS / 16], dv[HS / 16];  // the warp's 16 keys' rows
  FLASH_UNROLL
  for (int j = 0; j < HS / 16; ++j) wmma::fill_fragment(dk[j], 0.0f), wmma::fill_fragment(dv[j], 0.0f);
  float* ws = s + warp * 16 * kLdS;
  float* wdp = dp + warp * 16 * kLdS;
  bf16* wp = p16 + warp * 16 * kLdP;
  bf16* wds = ds16 + warp * 16 * kLdP;
  // The next query tile's q, dO, logsumexp and D (one row's a thread: kFlashTile <= threads).
  static_assert(kFlashTile <= kFlashThreads, "a thread loads at most one row's logsumexp and D");
  NextTile<HS> next_q, next_dout;
  float next_lse = 0.0f, next_dl = 0.0f;
  const auto load_query_tile = [&](int at) {
    next_q.load(rows, stride, h * hs, at, T);
    next_dout.load(drows, C, h * hs, at, T);
    const int r = threadIdx.x;
    const bool in = r < kFlashTile && at + r < T;
    next_lse = in ? logsumexp[static_cast<std::int64_t>(bh) * T + at + r] : 0.0f;
    next_dl = in ? delta[static_cast<std::int64_t>(bh) * T + at + r] : 0.0f;
  };
  load_query_tile(k0);
  for (int q0 = k0; q0 < T; q0 += kFlashTile) {
    __syncthreads();  // the previous query tile is no longer read
    next_q.stage(q);
    next_dout.stage(dout16);
    if (threadIdx.x < kFlashTile) lse[threadIdx.x] = next_lse, dl[threadIdx.x] = next_dl;
    if (q0 + kFlashTile < T) load_query_tile(q0 + kFlashTile);
    __syncthreads();
    rows_by_tile_transposed(k + warp * 16 * ldh, q, hs, ws);        // S^T = K Q^T
    rows_by_tile_transposed(v + warp * 16 * ldh, dout16, hs, wdp);  // dP^T = V dO^T
    __syncwarp();
    probabilities_and_ds(true, k0 + warp * 16, q0, T, scale, lse, dl, q0, ws, wdp, wp, wds);
    __syncwarp();
    {  // the warp's 16 rows of dS^T into the tile (query tile q0, key tile k0), two values a lane
      bf16* tile = ds_tiles + flash_ds_tile_index(T, bh, q0 / kFlashTile, k0 / kFlashTile) * kFlashTileElements +
                   warp * 16 * kFlashTile;
      const int lane = threadIdx.x % 32;
      for (int r = 0; r < 16; ++r)
        reinterpret_cast<__nv_bfloat162*>(tile + r * kFlashTile)[lane] =
            reinterpret_cast<const __nv_bfloat162*>(wds + r * kLdP)[lane];
    }
    accumulate_fragments_by_tile<HS>(wp, dout16, dv);  // dV += P^T dO
    accumulate_fragments_by_tile<HS>(wds, q, dk);      // dK += dS^T Q (scaled below)
  }
  // Out through S and dP's memory: dK (its columns C on in dqkv, scaled), then dV (2 C on). Each
  // array is named, never chosen at run time, so that it stays in registers.
  float* staging = s;
  const auto add_staged = [&](std::int64_t column, float factor) {
    for (int i = threadIdx.x; i < kFlashTile * hs; i += kFlashThreads) {
      const int r = i / hs, t = k0 + r;
      if (t < T) dqkv[(static_cast<std::int64_t>(b) * T + t) * stride + column + h * hs + i % hs] +=
          factor * staging[r * ldo + i % hs];
    }
  };
  __syncthreads();  // every warp is done with S and dP
  stage_fragments<HS>(dk, staging);
  __syncthreads();
  add_staged(C, scale);
  __syncthreads();  // the staged dK is read
  stage_fragments<HS>(dv, staging);
  __syncthreads();
  add_staged(2 * static_cast<std::int64_t>(C), 1.0f);
}

// grid (B * H, query tiles): dQ of the block's queries, dS K over the key tiles up to its own,
// dS from the tiles the dK/dV kernel wrote. Each warp reads its 16 queries' columns of a dS^T
// tile straight from global memory as column-major fragments (dS[q][k] = dS^T[k][q]).
template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_dq_kernel(int T, int C, int H, float scale, const float* qkv, const bf16* ds_tiles, float* dqkv) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int hs = HS, ldh = flash_ld_half(HS), ldo = flash_ld_float(HS);
  bf16* k = reinterpret_cast<bf16*>(shared);
  float* staging = reinterpret_cast<float*>(k + kFlashTile * ldh);
  // The last query tiles (the most keys) first: the short blocks then fill the grid's tail.
  const int bh = blockIdx.x, b = bh / H, h = bh % H, i = gridDim.y - 1 - blockIdx.y, q0 = i * kFlashTile;
  const int warp = threadIdx.x / 32;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  const bf16* row_tiles = ds_tiles + flash_ds_tile_index(T, bh, i, 0) * kFlashTileElements + warp * 16;
  FragAcc dq[HS / 16];  // the warp's 16 queries' rows
  FLASH_UNROLL
  for (int j = 0; j < HS / 16; ++j) wmma::fill_fragment(dq[j], 0.0f);
  NextTile<HS> next_k;
  next_k.load(rows, stride, C + h * hs, 0, T);
  for (int kt = 0; kt <= i; ++kt) {
    __syncthreads();  // the previous key tile is no longer read
    next_k.stage(k);
    if (kt < i) next_k.load(rows, stride, C + h * hs, (kt + 1) * kFlashTile, T);
    __syncthreads();
    const bf16* tile = row_tiles + static_cast<std::int64_t>(kt) * kFlashTileElements;
    FLASH_UNROLL
    for (int kk = 0; kk < kFlashTile / 16; ++kk) {  // dQ += dS K (scaled below), keys in order
      FragACol fa;
      wmma::load_matrix_sync(fa, tile + kk * 16 * kFlashTile, kFlashTile);
      FLASH_UNROLL
      for (int j = 0; j < HS / 16; ++j) {
        FragBRow fb;
        wmma::load_matrix_sync(fb, k + kk * 16 * ldh + j * 16, ldh);
        wmma::mma_sync(dq[j], fa, fb, dq[j]);
      }
    }
  }
  stage_fragments<HS>(dq, staging);
  __syncthreads();
  for (int e = threadIdx.x; e < kFlashTile * hs; e += kFlashThreads) {
    const int r = e / hs, t = q0 + r;
    if (t < T)
      dqkv[(static_cast<std::int64_t>(b) * T + t) * stride + h * hs + e % hs] += scale * staging[r * ldo + e % hs];
  }
}

}  // namespace slurm_train::cuda::flash_detail
