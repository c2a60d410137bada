// The device code of flash_attention.h: causal self-attention on tensor cores (mma.sync m16n8k16,
// bf16 operands, fp32 accumulation), FlashAttention-2's method. Included by flash_attention.cu,
// and by test/unit/flash_attention_emulated_test.cc, which runs it on a CPU emulation of CUDA's
// execution model (test/unit/cuda_emulation.h); so it uses only what that emulation provides:
// __syncthreads, __shfl_xor_sync, the warp products of warp_mma.cuh, the copies of async_copy.cuh,
// dynamic shared memory through FLASH_DYNAMIC_SHARED, and no static __shared__.
//
// Every warp owns 16 rows (queries, or keys in the dK/dV kernel) and keeps their scores, the
// probabilities, the running maxima and sums and every accumulator in registers: the fragments'
// layout is PTX's (warp_mma.cuh), so a product's result is masked, exponentiated and rounded in
// place and becomes the next product's operand without a trip through shared memory. Q, K, V and
// dO are read in fp32 (the next tile's copied ahead with cp.async while the products run) and
// rounded to bf16 as they are staged in shared memory, from where ldmatrix loads them as
// operands; scores, probabilities and accumulators are fp32, the probabilities (and dS) rounded
// to bf16 only as operands of the next product. Each output element is written by one
// thread (no atomics): the backward pass is two kernels, dK/dV by key tile over the query tiles,
// recomputing P from the forward pass's logsumexp and writing each tile's dS (bf16, the operand
// dQ's product reads) to global scratch, then dQ = dS K by query tile over those dS tiles. So
// dqkv is written, not added to: nothing need clear it first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/warp_mma.cuh"

// `#pragma unroll` for nvcc (fragment arrays indexed by constants stay in registers); nothing for
// a host compiler (the emulated tests').
#if defined(__CUDACC__)
#define FLASH_UNROLL _Pragma("unroll")
#else
#define FLASH_UNROLL
#endif

namespace slurm_train::cuda::flash_detail {

// Tiles: the forward and dQ kernels take 128 queries a block (eight warps), so that each key tile
// a block reads from global memory serves twice the rows it would with 64 (half the reads a
// query); the dK/dV kernel, whose accumulators are twice as many, 64 keys (four warps). The tiles
// they step over, and the dS tiles, are 64 rows.
constexpr int kFlashTile = 64;
constexpr int kFlashQueryWarps = 8, kFlashQueryThreads = kFlashQueryWarps * 32, kFlashQueryRows = kFlashQueryWarps * 16;
constexpr int kFlashKeyWarps = 4, kFlashKeyThreads = kFlashKeyWarps * 32;
constexpr unsigned kFlashFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
// Row strides of the bf16 tiles in shared memory, 16 bytes past a multiple of 128 so that the
// eight 16-byte rows one ldmatrix matrix reads fall in different banks.
__host__ __device__ constexpr int flash_ld_half(int hs) { return hs + 8; }
constexpr int kLdDs = kFlashTile + 8;

using bf16 = __nv_bfloat16;

// Bytes of dynamic shared memory each kernel needs for head size hs: bf16 tiles, and the fp32
// staging (TileStager) of the next tiles' rows, 64 x hs floats each.
constexpr std::size_t flash_staging_bytes(int hs) { return 4 * static_cast<std::size_t>(kFlashTile) * hs; }
// Forward: the block's 128 queries and a tile of keys and of values; the next keys and values.
constexpr std::size_t flash_forward_shared_bytes(int hs) {
  return 2 * static_cast<std::size_t>(kFlashQueryRows + 2 * kFlashTile) * flash_ld_half(hs) +
         2 * flash_staging_bytes(hs);
}
// dK/dV: the block's keys and values, a query tile's q and dO, and its logsumexp and D; the next
// q and dO.
constexpr std::size_t flash_backward_shared_bytes(int hs) {
  return 2 * static_cast<std::size_t>(4 * kFlashTile) * flash_ld_half(hs) + 4 * 2 * kFlashTile +
         2 * flash_staging_bytes(hs);
}
// dQ: a key tile, and the two dS tiles of the block's two query tiles against it; the next keys.
constexpr std::size_t flash_dq_shared_bytes(int hs) {
  return 2 * (static_cast<std::size_t>(kFlashTile) * flash_ld_half(hs) + 2 * kFlashTile * kLdDs) +
         flash_staging_bytes(hs);
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

// Calls f(std::integral_constant<int, HS>{}) for head size hs: the kernels' template argument. Throws
// std::invalid_argument for a head size they do not take.
template <typename F>
void with_head_size(int hs, F&& f) {
  switch (hs) {
    case 16:
      return f(std::integral_constant<int, 16>{});
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 48:
      return f(std::integral_constant<int, 48>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 80:
      return f(std::integral_constant<int, 80>{});
    case 96:
      return f(std::integral_constant<int, 96>{});
    case 112:
      return f(std::integral_constant<int, 112>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    default:
      throw std::invalid_argument("flash attention: head size " + std::to_string(hs) +
                                  ": expected a multiple of 16 up to 128");
  }
}

// ---- Staging: fp32 rows into bf16 tiles in shared memory -------------------------------------

// rows [row0, row0 + ROWS) of one (b, h)'s q, k or v (in qkv, from column 0, C or 2 C) or of an
// [B*T, C] tensor (row_stride C), head h's HS columns from `column`, rounded to bf16 into `tile`
// (row stride flash_ld_half(HS)) by THREADS threads; rows past T are 0. Four columns a load: rows and
// columns are multiples of 16 floats from a 16-byte aligned start (flash_attention.cu checks the
// pointers). For the block's own rows, read once; the tiles it steps over come through
// TileStager.
template <int HS, int ROWS, int THREADS>
__device__ inline void stage_rows(const float* rows, std::int64_t row_stride, int column, int row0, int T, bf16* tile) {
  constexpr int quads = HS / 4;
  static_assert(ROWS * quads % THREADS == 0, "a tile's float4 loads spread evenly over the threads");
  FLASH_UNROLL
  for (int j = 0; j < ROWS * quads / THREADS; ++j) {
    const int i = threadIdx.x + j * THREADS, r = i / quads, d = i % quads * 4, t = row0 + r;
    const float* at = rows + static_cast<std::int64_t>(t) * row_stride + column + d;
    const float4 x = t < T ? *reinterpret_cast<const float4*>(at) : float4{0.0f, 0.0f, 0.0f, 0.0f};
    *reinterpret_cast<uint2*>(tile + r * flash_ld_half(HS) + d) = {pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w)};
  }
}

// The next tile of stage_rows' rows, copied ahead with cp.async while the current tile's products
// run, so that they do not wait for it (in registers, as a prefetch, it would take registers the
// fragments and accumulators need). issue() starts this thread's copies of the rows into
// `staging` (shared memory, 64 x HS floats in the threads' copying order); land() waits for them
// and writes the values, rounded to bf16, into a tile as stage_rows does. Each thread converts
// what it copied itself, so land() needs no barrier before it; other threads' reads of the tile
// need one after it, and issue() one after land() (staging must have been read).
template <int HS, int THREADS>
struct TileStager {
  static constexpr int kQuads = kFlashTile * HS / 4 / THREADS;
  static_assert(kFlashTile * HS / 4 % THREADS == 0, "a tile's 16-byte copies spread evenly over the threads");
  float* staging;

  __device__ void issue(const float* rows, std::int64_t row_stride, int column, int row0, int T) const {
    constexpr int quads = HS / 4;
    FLASH_UNROLL
    for (int j = 0; j < kQuads; ++j) {
      const int i = threadIdx.x + j * THREADS, r = i / quads, d = i % quads * 4, t = row0 + r;
      const bool in = t < T;  // past T: zeros, from row 0's (valid) address
      cp_async_16(staging + 4 * i, rows + static_cast<std::int64_t>(in ? t : 0) * row_stride + column + d, in);
    }
    cp_async_commit();
  }
  __device__ void land(bf16* tile) const {
    constexpr int quads = HS / 4;
    cp_async_wait_all();
    FLASH_UNROLL
    for (int j = 0; j < kQuads; ++j) {
      const int i = threadIdx.x + j * THREADS, r = i / quads, d = i % quads * 4;
      const float4 x = *reinterpret_cast<const float4*>(staging + 4 * i);
      *reinterpret_cast<uint2*>(tile + r * flash_ld_half(HS) + d) = {pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w)};
    }
  }
};

// ---- Warp products on fragments (warp_mma.cuh's layouts) -----------------------------------
// A lane's accumulator of a warp's 16 x N result is float[N / 8][4]: n-tile j holds
// (g, 8j + 2t..2t+1) and (g + 8, 8j + 2t..2t+1), g = lane / 4, t = lane % 4.

__device__ inline int lane_id() { return threadIdx.x % 32; }

// A lane's ldmatrix_x4 row address (shared_address's) for the A fragment rows [m0, m0 + 16) x
// columns [0, 16) of a row-major tile; columns [k0, k0 + 16) are 2 k0 bytes on.
__device__ inline std::uint32_t a_rows(const bf16* tile, int ld, int m0) {
  const int lane = lane_id();
  return shared_address(tile + (m0 + lane % 16) * ld + lane / 16 * 8);
}
// The same A fragment from a tile that holds it transposed ([k][m]), for ldmatrix_x4_trans;
// rows [k0, k0 + 16) are 2 k0 ld bytes on.
__device__ inline std::uint32_t a_rows_transposed(const bf16* tile, int ld, int m0) {
  const int lane = lane_id();
  return shared_address(tile + (lane / 16 * 8 + lane % 8) * ld + m0 + lane / 8 % 2 * 8);
}
// The B fragments of n-tiles [0, 8) and [8, 16) at k-step [0, 16): from a tile stored [n][k]
// (ldmatrix_x4; n-tile n0's are 2 n0 ld bytes on, k-step k0's 2 k0), or stored [k][n]
// (ldmatrix_x4_trans; 2 k0 ld and 2 n0 bytes on). Registers 0-1 are the first n-tile's, 2-3 the
// second's.
__device__ inline std::uint32_t b_rows_nk(const bf16* tile, int ld) {
  const int lane = lane_id();
  return shared_address(tile + (lane / 16 * 8 + lane % 8) * ld + lane / 8 % 2 * 8);
}
__device__ inline std::uint32_t b_rows_kn(const bf16* tile, int ld) {
  const int lane = lane_id();
  return shared_address(tile + (lane / 8 % 2 * 8 + lane % 8) * ld + lane / 16 * 8);
}
constexpr std::uint32_t kBf16Bytes = 2;

// first += a b(n-tile 0), second += a b(n-tile 1): fb is one ldmatrix_x4 of two n-tiles' B
// fragments (b_rows_nk's or b_rows_kn's), registers 0-1 the first's, 2-3 the second's.
__device__ inline void mma_pair(const std::uint32_t (&a)[4], const std::uint32_t (&fb)[4], float (&first)[4],
                                float (&second)[4]) {
  const std::uint32_t b0[2] = {fb[0], fb[1]}, b1[2] = {fb[2], fb[3]};
  mma_bf16_16816(first, a, b0);
  mma_bf16_16816(second, a, b1);
}

// acc[16 x N] += a b: a one k-step's A fragment, b that k-step's 16 rows of a tile stored [k][n]
// (b_kstep: b_rows_kn's address of its first row).
template <int N>
__device__ inline void fragment_by_rows(const std::uint32_t (&a)[4], std::uint32_t b_kstep, float (&acc)[N / 8][4]) {
  FLASH_UNROLL
  for (int j = 0; j < N / 8; j += 2) {
    std::uint32_t fb[4];
    ldmatrix_x4_trans(fb, b_kstep + j * 8 * kBf16Bytes);
    mma_pair(a, fb, acc[j], acc[j + 1]);
  }
}

// acc[16 x N] += (B[N x K] A[16 x K]^T)^T: rows m0.. of row-major tile a against the N rows of
// tile b (both [rows][K] bf16): scores of 16 rows against N keys (or queries).
template <int K, int N>
__device__ inline void warp_rows_by_rows(const bf16* a, int lda, int m0, const bf16* b, int ldb,
                                         float (&acc)[N / 8][4]) {
  static_assert(K % 16 == 0 && N % 16 == 0, "whole fragments");
  const std::uint32_t a0 = a_rows(a, lda, m0), b0 = b_rows_nk(b, ldb);
  FLASH_UNROLL
  for (int kk = 0; kk < K / 16; ++kk) {
    std::uint32_t fa[4];
    ldmatrix_x4(fa, a0 + kk * 16 * kBf16Bytes);
    FLASH_UNROLL
    for (int j = 0; j < N / 8; j += 2) {
      std::uint32_t fb[4];
      ldmatrix_x4(fb, b0 + (j * 8 * ldb + kk * 16) * kBf16Bytes);
      mma_pair(fa, fb, acc[j], acc[j + 1]);
    }
  }
}

// acc[16 x N] += P[16 x K] B[K x N]: P's fragments in registers (k-step kk's in p[kk]), B the K
// rows of a row-major tile [K][N] (ld ldb).
template <int K, int N>
__device__ inline void warp_fragments_by_tile(const std::uint32_t (&p)[K / 16][4], const bf16* b, int ldb,
                                              float (&acc)[N / 8][4]) {
  const std::uint32_t b0 = b_rows_kn(b, ldb);
  FLASH_UNROLL
  for (int kk = 0; kk < K / 16; ++kk) fragment_by_rows<N>(p[kk], b0 + kk * 16 * ldb * kBf16Bytes, acc);
}

// A 16 x N result as the A operand (bf16) of a product over N: k-step kk is n-tiles 2kk, 2kk + 1.
template <int N>
__device__ inline void to_operand(const float (&c)[N / 8][4], std::uint32_t (&a)[N / 16][4]) {
  FLASH_UNROLL
  for (int kk = 0; kk < N / 16; ++kk) {
    a[kk][0] = pack_bf16x2(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack_bf16x2(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack_bf16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack_bf16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

template <int N>
__device__ inline void zero(float (&acc)[N][4]) {
  FLASH_UNROLL
  for (int j = 0; j < N; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
}

// dst[row, 0..HS) = factor * a warp's 16 x HS accumulator (rows row0.., those at or past T left
// out), two adjacent columns at a time; the rows of dst are `stride` floats apart. Where copy is
// given (laid out as dst), the values again in bf16.
template <int HS>
__device__ inline void store_rows(float* dst, std::int64_t stride, int row0, int T, float factor,
                                  const float (&acc)[HS / 8][4], bf16* copy = nullptr) {
  const int g = lane_id() / 4, t = lane_id() % 4;
  FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + g + 8 * half;
    if (row >= T) continue;
    const std::int64_t at = static_cast<std::int64_t>(row) * stride + 2 * t;
    FLASH_UNROLL
    for (int j = 0; j < HS / 8; ++j) {
      const float x = factor * acc[j][2 * half], y = factor * acc[j][2 * half + 1];
      *reinterpret_cast<float2*>(dst + at + 8 * j) = {x, y};
      if (copy) *reinterpret_cast<std::uint32_t*>(copy + at + 8 * j) = pack_bf16x2(x, y);
    }
  }
}

// ---- Forward ---------------------------------------------------------------------------------

// grid (B * H, 128-query tiles). out[B*T, C] = attention, logsumexp[(b*H + h)*T + t] of the
// scaled scores, as attention_forward; out_copy (where given) = out in bf16.
template <int HS>
__global__ void __launch_bounds__(kFlashQueryThreads, 2)
    flash_forward_kernel(int T, int C, int H, float scale, const float* qkv, float* out, float* logsumexp,
                         bf16* out_copy) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int ldh = flash_ld_half(HS);
  bf16* q = reinterpret_cast<bf16*>(shared);  // [128][HS]
  bf16* k = q + kFlashQueryRows * ldh;        // [64][HS]
  bf16* v = k + kFlashTile * ldh;             // [64][HS]
  float* staging = reinterpret_cast<float*>(v + kFlashTile * ldh);
  const TileStager<HS, kFlashQueryThreads> next_k{staging}, next_v{staging + kFlashTile * HS};
  // The last query tiles (the most keys) first: the short blocks then fill the grid's tail.
  const int bh = blockIdx.x, b = bh / H, h = bh % H, q0 = (gridDim.y - 1 - blockIdx.y) * kFlashQueryRows;
  const int warp = threadIdx.x / 32, g = lane_id() / 4, t = lane_id() % 4, wq0 = q0 + warp * 16;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  next_k.issue(rows, stride, C + h * HS, 0, T);
  next_v.issue(rows, stride, 2 * C + h * HS, 0, T);
  stage_rows<HS, kFlashQueryRows, kFlashQueryThreads>(rows, stride, h * HS, q0, T, q);
  const float scale_log2 = scale * kLog2e;  // scores in log2 units: exp2 is one instruction
  float o[HS / 8][4], row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  zero(o);
  const int key_end = q0 + kFlashQueryRows < T ? q0 + kFlashQueryRows : T;  // causal: up to the last query
  for (int k0 = 0; k0 < key_end; k0 += kFlashTile) {
    __syncthreads();  // the previous tile's k and v are no longer read
    next_k.land(k);
    next_v.land(v);
    __syncthreads();
    if (k0 + kFlashTile < key_end) {
      next_k.issue(rows, stride, C + h * HS, k0 + kFlashTile, T);
      next_v.issue(rows, stride, 2 * C + h * HS, k0 + kFlashTile, T);
    }
    if (k0 > wq0 + 15 || wq0 >= T) continue;  // every key of the tile after the warp's queries
    float s[kFlashTile / 8][4];
    zero(s);
    warp_rows_by_rows<HS, kFlashTile>(q, ldh, warp * 16, k, ldh, s);
    // Online softmax of the lane's two rows (g and g + 8), whose 64 columns the quad's four lanes
    // share: the quad's maximum by two shuffles, the sums kept per lane until the end.
    const bool masked = k0 + kFlashTile - 1 > wq0 || k0 + kFlashTile > T;
    FLASH_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int tq = wq0 + g + 8 * half;
      float tile_max = -INFINITY;
      FLASH_UNROLL
      for (int j = 0; j < kFlashTile / 8; ++j) FLASH_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int tk = k0 + 8 * j + 2 * t + e;
        float& x = s[j][2 * half + e];
        x = masked && (tk > tq || tk >= T) ? -INFINITY : x * scale_log2;
        tile_max = fmaxf(tile_max, x);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFlashFullMask, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFlashFullMask, tile_max, 2));
      const float new_max = fmaxf(row_max[half], tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet: all 0
      const float rescale = exp2f(row_max[half] - base);
      float sum = 0.0f;
      FLASH_UNROLL
      for (int j = 0; j < kFlashTile / 8; ++j) FLASH_UNROLL
      for (int e = 0; e < 2; ++e) {
        float& x = s[j][2 * half + e];
        x = exp2f(x - base);
        sum += x;
      }
      row_max[half] = new_max;
      row_sum[half] = row_sum[half] * rescale + sum;
      FLASH_UNROLL
      for (int j = 0; j < HS / 8; ++j) o[j][2 * half] *= rescale, o[j][2 * half + 1] *= rescale;
    }
    std::uint32_t p[kFlashTile / 16][4];
    to_operand<kFlashTile>(s, p);
    warp_fragments_by_tile<kFlashTile, HS>(p, v, ldh, o);
  }
  if (wq0 >= T) return;
  FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    row_sum[half] += __shfl_xor_sync(kFlashFullMask, row_sum[half], 1);
    row_sum[half] += __shfl_xor_sync(kFlashFullMask, row_sum[half], 2);
    const int tq = wq0 + g + 8 * half;
    if (t == 0 && tq < T)
      logsumexp[static_cast<std::int64_t>(bh) * T + tq] = row_max[half] * kLn2 + logf(row_sum[half]);
    const float inverse = 1.0f / row_sum[half];
    FLASH_UNROLL
    for (int j = 0; j < HS / 8; ++j) o[j][2 * half] *= inverse, o[j][2 * half + 1] *= inverse;
  }
  const std::int64_t first = static_cast<std::int64_t>(b) * T * C + h * HS;
  store_rows<HS>(out + first, C, wq0, T, 1.0f, o, out_copy ? out_copy + first : nullptr);
}

// D[(b*H + h)*T + t] = sum over head h's columns of dout * out, one warp per (b, h, t): its
// lanes read the row's adjacent columns (one thread a row would read 32 rows' columns apart).
constexpr int kDeltaWarps = 8;
__global__ void flash_delta_kernel(int B, int T, int C, int H, int hs, const float* out, const float* dout,
                                   float* delta) {
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

// ---- Backward ----------------------------------------------------------------------------------

// grid (B * H, 64-key tiles): dK and dV of the block's keys over the query tiles from its own on.
// A warp's 16 keys are the rows of S^T = K Q^T and dP^T = V dO^T, so that P^T and dS^T are, in
// registers, the A operands of dV += P^T dO and dK += dS^T Q.
template <int HS>
__global__ void __launch_bounds__(kFlashKeyThreads, 2)
    flash_dkdv_kernel(int T, int C, int H, float scale, const float* qkv, const float* dout, const float* logsumexp,
                      const float* delta, float* dqkv, bf16* ds_tiles) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int ldh = flash_ld_half(HS);
  bf16* k = reinterpret_cast<bf16*>(shared);
  bf16* v = k + kFlashTile * ldh;
  bf16* q = v + kFlashTile * ldh;
  bf16* dout16 = q + kFlashTile * ldh;
  float* lse2 = reinterpret_cast<float*>(dout16 + kFlashTile * ldh);  // the query tile's, in log2 units
  float* dl = lse2 + kFlashTile;                                      // and its D
  const TileStager<HS, kFlashKeyThreads> next_q{dl + kFlashTile}, next_dout{dl + kFlashTile + kFlashTile * HS};
  const int bh = blockIdx.x, b = bh / H, h = bh % H, k0 = blockIdx.y * kFlashTile;
  const int warp = threadIdx.x / 32, g = lane_id() / 4, t = lane_id() % 4, wk0 = k0 + warp * 16;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  const float* drows = dout + static_cast<std::int64_t>(b) * T * C;
  stage_rows<HS, kFlashTile, kFlashKeyThreads>(rows, stride, C + h * HS, k0, T, k);
  stage_rows<HS, kFlashTile, kFlashKeyThreads>(rows, stride, 2 * C + h * HS, k0, T, v);
  const float scale_log2 = scale * kLog2e;
  float dk[HS / 8][4], dv[HS / 8][4];
  zero(dk);
  zero(dv);
  static_assert(kFlashTile <= kFlashKeyThreads, "a thread stages at most one row's logsumexp and D");
  next_q.issue(rows, stride, h * HS, k0, T);
  next_dout.issue(drows, C, h * HS, k0, T);
  for (int q0 = k0; q0 < T; q0 += kFlashTile) {
    __syncthreads();  // the previous query tile is no longer read
    next_q.land(q);
    next_dout.land(dout16);
    if (threadIdx.x < kFlashTile) {
      const bool in = q0 + threadIdx.x < T;
      const std::int64_t at = static_cast<std::int64_t>(bh) * T + q0 + threadIdx.x;
      lse2[threadIdx.x] = in ? logsumexp[at] * kLog2e : 0.0f;
      dl[threadIdx.x] = in ? delta[at] : 0.0f;
    }
    __syncthreads();
    if (q0 + kFlashTile < T) {
      next_q.issue(rows, stride, h * HS, q0 + kFlashTile, T);
      next_dout.issue(drows, C, h * HS, q0 + kFlashTile, T);
    }
    float s[kFlashTile / 8][4], dp[kFlashTile / 8][4];  // S^T, dP^T: [16 keys][64 queries]
    zero(s);
    zero(dp);
    warp_rows_by_rows<HS, kFlashTile>(k, ldh, warp * 16, q, ldh, s);
    warp_rows_by_rows<HS, kFlashTile>(v, ldh, warp * 16, dout16, ldh, dp);
    // P^T = exp(S^T scale - logsumexp) and dS^T = P^T (dP^T - D), 0 where the mask or T cuts.
    const bool masked = q0 < wk0 + 15 || q0 + kFlashTile > T || wk0 + 16 > T;
    FLASH_UNROLL
    for (int j = 0; j < kFlashTile / 8; ++j) FLASH_UNROLL
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * j + 2 * t + e % 2, tq = q0 + col, tk = wk0 + g + 8 * (e / 2);
      const float p = masked && (tk > tq || tq >= T || tk >= T) ? 0.0f : exp2f(s[j][e] * scale_log2 - lse2[col]);
      s[j][e] = p;
      dp[j][e] = p * (dp[j][e] - dl[col]);
    }
    std::uint32_t p16[kFlashTile / 16][4], ds16[kFlashTile / 16][4];
    to_operand<kFlashTile>(s, p16);
    to_operand<kFlashTile>(dp, ds16);
    {  // the warp's 16 rows of dS^T into the tile (query tile q0, key tile k0), as rounded for dK
      bf16* tile = ds_tiles + flash_ds_tile_index(T, bh, q0 / kFlashTile, k0 / kFlashTile) * kFlashTileElements;
      std::uint32_t* top = reinterpret_cast<std::uint32_t*>(tile + (warp * 16 + g) * kFlashTile + 2 * t);
      std::uint32_t* bottom = top + 8 * kFlashTile / 2;
      FLASH_UNROLL
      for (int kk = 0; kk < kFlashTile / 16; ++kk) {
        top[8 * kk] = ds16[kk][0], bottom[8 * kk] = ds16[kk][1];
        top[8 * kk + 4] = ds16[kk][2], bottom[8 * kk + 4] = ds16[kk][3];
      }
    }
    warp_fragments_by_tile<kFlashTile, HS>(p16, dout16, ldh, dv);  // dV += P^T dO
    warp_fragments_by_tile<kFlashTile, HS>(ds16, q, ldh, dk);      // dK += dS^T Q (scaled below)
  }
  float* block_rows = dqkv + static_cast<std::int64_t>(b) * T * stride + h * HS;
  store_rows<HS>(block_rows + C, stride, wk0, T, scale, dk);
  store_rows<HS>(block_rows + 2 * static_cast<std::int64_t>(C), stride, wk0, T, 1.0f, dv);
}

// grid (B * H, 128-query tiles): dQ of the block's queries, dS K over the key tiles up to its
// last query, dS from the tiles the dK/dV kernel wrote (two a key tile: the block's two 64-query
// tiles), staged in shared memory beside the key tile, from where ldmatrix reads dS^T transposed.
template <int HS>
__global__ void __launch_bounds__(kFlashQueryThreads, 2)
    flash_dq_kernel(int T, int C, int H, float scale, const float* qkv, const bf16* ds_tiles, float* dqkv) {
  FLASH_DYNAMIC_SHARED(shared);
  constexpr int ldh = flash_ld_half(HS);
  bf16* k = reinterpret_cast<bf16*>(shared);  // [64][HS]
  bf16* ds = k + kFlashTile * ldh;            // [2][64 keys][64 queries]
  const TileStager<HS, kFlashQueryThreads> next_k{reinterpret_cast<float*>(ds + 2 * kFlashTile * kLdDs)};
  // The last query tiles (the most keys) first: the short blocks then fill the grid's tail.
  const int bh = blockIdx.x, b = bh / H, h = bh % H, q0 = (gridDim.y - 1 - blockIdx.y) * kFlashQueryRows;
  const int warp = threadIdx.x / 32, wq0 = q0 + warp * 16;
  const int tiles = (T + kFlashTile - 1) / kFlashTile, first_tile = q0 / kFlashTile;
  const int last_query = q0 + kFlashQueryRows - 1 < T - 1 ? q0 + kFlashQueryRows - 1 : T - 1;
  const std::int64_t stride = 3 * static_cast<std::int64_t>(C);
  const float* rows = qkv + static_cast<std::int64_t>(b) * T * stride;
  float dq[HS / 8][4];
  zero(dq);
  // The next key tile's dS tiles, held in registers while the products run (they are few; the
  // keys come through next_k): 16-byte pieces, 8 a row of 64 queries, 2 tiles of 64 rows over the
  // threads.
  constexpr int kPieces = 2 * kFlashTile * 8 / kFlashQueryThreads;
  static_assert(2 * kFlashTile * 8 % kFlashQueryThreads == 0, "the dS pieces spread evenly over the threads");
  uint4 next_ds[kPieces];
  const auto load_ds = [&](int kt) {
    FLASH_UNROLL
    for (int j = 0; j < kPieces; ++j) {
      const int i = threadIdx.x + j * kFlashQueryThreads, tile = i / (kFlashTile * 8), qi = first_tile + tile;
      next_ds[j] = kt <= qi && qi < tiles
                       ? reinterpret_cast<const uint4*>(ds_tiles + flash_ds_tile_index(T, bh, qi, kt) *
                                                                       kFlashTileElements)[i % (kFlashTile * 8)]
                       : uint4{0, 0, 0, 0};
    }
  };
  load_ds(0);
  next_k.issue(rows, stride, C + h * HS, 0, T);
  const int key_tiles = last_query / kFlashTile + 1;
  for (int kt = 0; kt < key_tiles; ++kt) {
    __syncthreads();  // the previous key tile and its dS are no longer read
    next_k.land(k);
    FLASH_UNROLL
    for (int j = 0; j < kPieces; ++j) {
      const int i = threadIdx.x + j * kFlashQueryThreads, tile = i / (kFlashTile * 8), r = i / 8 % kFlashTile;
      *reinterpret_cast<uint4*>(ds + (tile * kFlashTile + r) * kLdDs + i % 8 * 8) = next_ds[j];
    }
    __syncthreads();
    if (kt + 1 < key_tiles) {
      load_ds(kt + 1);
      next_k.issue(rows, stride, C + h * HS, (kt + 1) * kFlashTile, T);
    }
    if (kt > wq0 / kFlashTile || wq0 >= T) continue;  // the warp's query tile has no dS against it
    // The warp's query tile's dS^T, its 16 queries' columns, as dS's A fragments; K as B.
    const std::uint32_t a0 = a_rows_transposed(ds + warp / 4 * kFlashTile * kLdDs, kLdDs, warp % 4 * 16);
    const std::uint32_t b0 = b_rows_kn(k, ldh);
    FLASH_UNROLL
    for (int kk = 0; kk < kFlashTile / 16; ++kk) {  // dQ += dS K (scaled below), keys in order
      std::uint32_t fa[4];
      ldmatrix_x4_trans(fa, a0 + kk * 16 * kLdDs * kBf16Bytes);
      fragment_by_rows<HS>(fa, b0 + kk * 16 * ldh * kBf16Bytes, dq);
    }
  }
  store_rows<HS>(dqkv + static_cast<std::int64_t>(b) * T * stride + h * HS, stride, wq0, T, scale, dq);
}

}  // namespace slurm_train::cuda::flash_detail
