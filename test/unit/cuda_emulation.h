// A CPU emulation of the part of CUDA's execution model that kernels/cuda/*_kernels.cuh device
// code uses, so that a kernel's logic (its indexing, masking, tiling and barriers) is tested on a
// machine without a GPU. It says nothing of a GPU's speed or of its hardware: the CUDA tests
// (test/cuda/) do that where there is one.
//
// Every thread of a block is a std::thread (so a missing barrier can show as a race); blocks run
// one after another, so a static __shared__ array (a function-local static here) is the running
// block's. __syncthreads and __syncwarp are barriers of the block's and the warp's
// threads; __shfl_xor_sync exchanges through a per-warp slot array between two warp barriers.
// WMMA fragments hold their whole 16 x 16 matrix in every lane (the API never says which lane
// holds which element, so code that uses it through the API cannot tell); loads check the
// alignment and leading dimension the hardware requires, stores write from lane 0, and every
// fragment operation ends with a warp barrier, as the warp-wide operation it is. Dynamic shared
// memory starts filled with NaNs, so that reading what was never written shows.
#pragma once

// CUDA's own headers first, before the macros below rename what they declare.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace cuda_emu {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

struct BlockState {
  explicit BlockState(unsigned threads) : all(threads) {
    for (unsigned w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
    slots.resize(threads);
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<std::uint64_t> slots;  // __shfl_xor_sync's, one per thread
  std::atomic<bool> misuse{false};
  std::string what;  // the first misuse
  std::atomic_flag what_taken = ATOMIC_FLAG_INIT;
};

inline thread_local Index thread_index, block_index, block_dim, grid_dim;
inline thread_local unsigned char* dynamic_shared = nullptr;
inline thread_local BlockState* block_state = nullptr;

inline unsigned linear_thread() { return thread_index.x + thread_index.y * block_dim.x; }
inline unsigned lane() { return linear_thread() % 32; }
inline void warp_barrier() { block_state->warps[linear_thread() / 32]->arrive_and_wait(); }
inline void misuse(const std::string& what) {
  if (!block_state->what_taken.test_and_set()) block_state->what = what;
  block_state->misuse = true;
}

// Runs kernel(args...) on a grid of grid.x * grid.y blocks of block.x * block.y threads (a
// multiple of 32) with `shared_bytes` of dynamic shared memory. Throws std::logic_error naming
// the first misuse of the API (a misaligned fragment, a bad leading dimension).
template <typename Kernel, typename... Args>
void launch(Index grid, Index block, std::size_t shared_bytes, Kernel kernel, Args... args) {
  block.y = std::max(block.y, 1u);
  const unsigned threads = block.x * block.y;
  if (threads == 0 || threads % 32 != 0) throw std::logic_error("cuda_emu: threads must be a positive multiple of 32");
  grid.y = std::max(grid.y, 1u);
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      BlockState state(threads);
      const std::size_t floats = (shared_bytes + sizeof(float) - 1) / sizeof(float);
      const std::size_t bytes = std::max<std::size_t>((floats * sizeof(float) + 127) / 128 * 128, 128);
      std::unique_ptr<float, decltype(&std::free)> shared(static_cast<float*>(std::aligned_alloc(128, bytes)), &std::free);
      if (!shared) throw std::bad_alloc();
      std::fill_n(shared.get(), floats, std::numeric_limits<float>::quiet_NaN());
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          thread_index = {t % block.x, t / block.x, 0};
          block_index = {bx, by, 0};
          block_dim = {block.x, block.y, 1};
          grid_dim = {grid.x, grid.y, 1};
          dynamic_shared = reinterpret_cast<unsigned char*>(shared.get());
          block_state = &state;
          kernel(args...);
        });
      for (auto& t : pool) t.join();
      if (state.misuse) throw std::logic_error("cuda_emu: " + state.what);
    }
}
template <typename Kernel, typename... Args>
void launch(Index grid, unsigned threads, std::size_t shared_bytes, Kernel kernel, Args... args) {
  launch(grid, Index{threads, 1, 1}, shared_bytes, kernel, args...);
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::thread_index)
#define blockIdx (::cuda_emu::block_index)
#define blockDim (::cuda_emu::block_dim)
#define gridDim (::cuda_emu::grid_dim)
// Device code compares threadIdx's unsigned fields with ints, as CUDA code does everywhere.
#pragma GCC diagnostic ignored "-Wsign-compare"

// CUDA's headers define these for host compilers (as attributes g++ does not know): none here.
#undef __global__
#undef __device__
#undef __host__
#undef __launch_bounds__
#undef __shared__
#undef __forceinline__
// static: no clash with the nvcc-built kernels' host stubs in the same program
#define __global__ [[maybe_unused]] static
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static  // blocks run one at a time: a static is the running block's
#define __launch_bounds__(n)
#define FLASH_DYNAMIC_SHARED(name) unsigned char* name = ::cuda_emu::dynamic_shared

inline void __syncthreads() { ::cuda_emu::block_state->all.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::cuda_emu::warp_barrier(); }

namespace cuda_emu {
// Every lane's `value`, then lane `source(lane)`'s, between two warp barriers.
template <typename T, typename Source>
T exchange(T value, Source source) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t) && std::is_trivially_copyable_v<T>);
  auto& slots = block_state->slots;
  const unsigned me = linear_thread(), warp0 = me - lane();
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  slots[me] = bits;
  warp_barrier();
  bits = slots[warp0 + source(lane()) % 32];
  warp_barrier();  // every lane has read before a next exchange writes
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace cuda_emu

template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask) {
  return ::cuda_emu::exchange(value, [&](unsigned lane) { return lane ^ static_cast<unsigned>(lane_mask); });
}
template <typename T>
T __shfl_sync(unsigned, T value, int source_lane) {
  return ::cuda_emu::exchange(value, [&](unsigned) { return static_cast<unsigned>(source_lane); });
}
inline unsigned __ballot_sync(unsigned, int predicate) {
  auto& slots = ::cuda_emu::block_state->slots;
  const unsigned me = ::cuda_emu::linear_thread(), warp0 = me - ::cuda_emu::lane();
  slots[me] = predicate != 0;
  ::cuda_emu::warp_barrier();
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) bits |= static_cast<unsigned>(slots[warp0 + l] != 0) << l;
  ::cuda_emu::warp_barrier();
  return bits;
}
inline int __popc(unsigned x) { return std::popcount(x); }
// A product rounded on its own: nvcc never fuses it into an FMA (a host compiler here never fuses).
inline float __fmul_rn(float a, float b) { return a * b; }
inline int atomicMin(int* address, int value) {
  std::atomic_ref<int> a(*address);
  int old = a.load();
  while (value < old && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}
// CUDA's device min and max, on any two arithmetic types.
template <typename A, typename B>
auto min(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? a : b;
}
template <typename A, typename B>
auto max(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? b : a;
}

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "cuda_emu: 16 x 16 x 16 fragments only");
  float m[16][16];
};

namespace detail {
inline float to_float(float x) { return x; }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
void check(const T* p, unsigned ld, const char* op) {
  // 256-bit aligned pointers, and leading dimensions of a multiple of 16 bytes (CUDA's WMMA rules).
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0)
    ::cuda_emu::misuse(std::string(op) + ": pointer not 32-byte aligned");
  if ((ld * sizeof(T)) % 16 != 0) ::cuda_emu::misuse(std::string(op) + ": leading dimension not a multiple of 16 bytes");
}
}  // namespace detail

template <typename Use, typename T, typename L, typename V>
void fill_fragment(fragment<Use, 16, 16, 16, T, L>& f, V value) {
  for (auto& row : f.m)
    for (float& x : row) x = static_cast<float>(value);
  ::cuda_emu::warp_barrier();
}

template <typename T, typename L>
void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, L>& f, const T* p, unsigned ld) {
  detail::check(p, ld, "load_matrix_sync(matrix_a)");
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned k = 0; k < 16; ++k)
      f.m[i][k] = detail::to_float(std::is_same_v<L, row_major> ? p[i * ld + k] : p[k * ld + i]);
  ::cuda_emu::warp_barrier();
}

template <typename T, typename L>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, L>& f, const T* p, unsigned ld) {
  detail::check(p, ld, "load_matrix_sync(matrix_b)");
  for (unsigned k = 0; k < 16; ++k)
    for (unsigned j = 0; j < 16; ++j)
      f.m[k][j] = detail::to_float(std::is_same_v<L, row_major> ? p[k * ld + j] : p[j * ld + k]);
  ::cuda_emu::warp_barrier();
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ld, layout_t layout) {
  detail::check(p, ld, "load_matrix_sync(accumulator)");
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 16; ++j) f.m[i][j] = layout == mem_row_major ? p[i * ld + j] : p[j * ld + i];
  ::cuda_emu::warp_barrier();
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ld, layout_t layout) {
  detail::check(p, ld, "store_matrix_sync");
  if (::cuda_emu::lane() == 0)
    for (unsigned i = 0; i < 16; ++i)
      for (unsigned j = 0; j < 16; ++j) (layout == mem_row_major ? p[i * ld + j] : p[j * ld + i]) = f.m[i][j];
  ::cuda_emu::warp_barrier();
}

template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = c.m[i][j];
      for (int k = 0; k < 16; ++k) sum += a.m[i][k] * b.m[k][j];
      out[i][j] = sum;
    }
  std::memcpy(d.m, out, sizeof(out));
  ::cuda_emu::warp_barrier();
}

}  // namespace nvcuda::wmma
