// A CPU emulation of the part of CUDA's execution model that kernels/cuda/*_kernels.cuh device
// code uses, so that a kernel's logic (its indexing, masking, tiling and barriers) is tested on a
// machine without a GPU. It says nothing of a GPU's speed or of its hardware: the CUDA tests
// (test/cuda/) do that where there is one.
//
// Every thread of a block is a std::thread (so a missing barrier can show as a race); blocks run
// one after another, so a static __shared__ array (a function-local static here) is the running
// block's. __syncthreads and __syncwarp are barriers of the block's and the warp's threads;
// __shfl_xor_sync exchanges through a per-warp slot array between two warp barriers. mma.sync and
// ldmatrix (warp_mma.cuh) keep PTX's documented fragment layouts lane by lane, check the alignment
// the hardware requires, and are warp barriers, as the warp-wide operations they are. cp.async's
// copies land at the issuing thread's wait. Dynamic shared memory starts filled with NaNs, so that
// reading what was never written shows.
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
    words.resize(threads * 8);
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<std::uint64_t> slots;  // __shfl_xor_sync's, one per thread
  std::vector<std::uint32_t> words;  // mma_bf16_16816's operands, eight per thread
  std::atomic<bool> misuse{false};
  std::string what;  // the first misuse
  std::atomic_flag what_taken = ATOMIC_FLAG_INIT;
};

inline thread_local Index thread_index, block_index, block_dim, grid_dim;
inline thread_local unsigned char* dynamic_shared = nullptr;
inline thread_local std::size_t dynamic_shared_bytes = 0;
inline thread_local BlockState* block_state = nullptr;
// cp_async_16's copies, held back until the thread's cp_async_wait_all: shared memory it reads
// before then still holds what was there (NaNs at first).
struct PendingCopy {
  void* shared;
  const void* global;
  bool valid;
};
inline thread_local std::vector<PendingCopy> pending_copies;

inline unsigned linear_thread() { return thread_index.x + thread_index.y * block_dim.x; }
inline unsigned lane() { return linear_thread() % 32; }
inline void warp_barrier() { block_state->warps[linear_thread() / 32]->arrive_and_wait(); }
inline void misuse(const std::string& what) {
  if (!block_state->what_taken.test_and_set()) block_state->what = what;
  block_state->misuse = true;
}

// Runs kernel(args...) on a grid of grid.x * grid.y blocks of block.x * block.y threads (a
// multiple of 32) with `shared_bytes` of dynamic shared memory. Throws std::logic_error naming
// the first misuse of the API (a misaligned or out-of-bounds ldmatrix row).
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
      std::unique_ptr<float, decltype(&std::free)> shared(static_cast<float*>(std::aligned_alloc(128, bytes)),
                                                          &std::free);
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
          dynamic_shared_bytes = shared_bytes;
          block_state = &state;
          pending_copies.clear();
          kernel(args...);
          if (!pending_copies.empty()) misuse("cp.async copies never waited for");
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
#define __launch_bounds__(...)
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

// mma.sync and ldmatrix (kernels/cuda/warp_mma.cuh), with the fragment layouts PTX documents:
// every lane leaves its operands in the warp's words between two warp barriers and computes its
// own part of the result from them, so a kernel that puts an element in the wrong lane or
// register gets a wrong product here as it would on the GPU.
namespace cuda_emu {
inline float bf16_half(std::uint32_t word, unsigned half) {
  const std::uint32_t bits = half == 0 ? word << 16 : word & 0xffff0000u;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// r[i] for this lane from the 16-byte row addresses lanes 8i..8i+7 give, transposed or not.
inline void ldmatrix(std::uint32_t (&r)[4], std::uint32_t address, bool trans, const char* op) {
  if (address % 16 != 0) misuse(std::string(op) + ": row address not 16-byte aligned");
  if (address + 16 > dynamic_shared_bytes) {
    misuse(std::string(op) + ": row outside shared memory");
    address = 0;
  }
  const auto at = reinterpret_cast<std::uintptr_t>(dynamic_shared + address);
  auto& slots = block_state->slots;
  const unsigned me = linear_thread(), warp0 = me - lane(), g = lane() / 4, t = lane() % 4;
  slots[me] = at;
  warp_barrier();
  for (unsigned i = 0; i < 4; ++i) {
    std::uint16_t h[2];
    for (unsigned e = 0; e < 2; ++e) {
      // M_i(g, 2t + e) is element 2t + e of row g; transposed, element g of row 2t + e.
      const auto* p = reinterpret_cast<const std::uint16_t*>(slots[warp0 + 8 * i + (trans ? 2 * t + e : g)]);
      h[e] = p[trans ? g : 2 * t + e];
    }
    r[i] = static_cast<std::uint32_t>(h[0]) | static_cast<std::uint32_t>(h[1]) << 16;
  }
  warp_barrier();
}
}  // namespace cuda_emu

// Addresses in the block's dynamic shared memory are offsets from its start.
inline std::uint32_t shared_address(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto shared = reinterpret_cast<std::uintptr_t>(::cuda_emu::dynamic_shared);
  if (at < shared || at >= shared + ::cuda_emu::dynamic_shared_bytes)
    ::cuda_emu::misuse("shared_address: not in shared memory");
  return static_cast<std::uint32_t>(at - shared);
}
inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  ::cuda_emu::ldmatrix(r, address, false, "ldmatrix_x4");
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  ::cuda_emu::ldmatrix(r, address, true, "ldmatrix_x4_trans");
}

// d[16 x 8] += a[16 x 16] b[16 x 8], the terms of each element added in k order in fp32.
inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  using namespace ::cuda_emu;
  auto& words = block_state->words;
  const unsigned me = linear_thread(), warp0 = me - lane(), g = lane() / 4, t = lane() % 4;
  for (unsigned i = 0; i < 4; ++i) words[8 * me + i] = a[i];
  words[8 * me + 4] = b[0], words[8 * me + 5] = b[1];
  warp_barrier();
  const auto A = [&](unsigned row, unsigned k) {  // in lane (row % 8) * 4 + (k % 8) / 2
    const unsigned from = warp0 + (row % 8) * 4 + (k % 8) / 2, reg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return bf16_half(words[8 * from + reg], k % 2);
  };
  const auto B = [&](unsigned k, unsigned n) {  // in lane n * 4 + (k % 8) / 2
    const unsigned from = warp0 + n * 4 + (k % 8) / 2;
    return bf16_half(words[8 * from + 4 + (k >= 8 ? 1 : 0)], k % 2);
  };
  float out[4];
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = g + (e >= 2 ? 8 : 0), col = 2 * t + e % 2;
    float sum = d[e];
    for (unsigned k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
    out[e] = sum;
  }
  warp_barrier();
  for (unsigned e = 0; e < 4; ++e) d[e] = out[e];
}

// cp.async (kernels/cuda/async_copy.cuh): a copy lands at the issuing thread's wait, not before.
inline void cp_async_16(void* shared, const void* global, bool valid) {
  using namespace ::cuda_emu;
  const auto at = reinterpret_cast<std::uintptr_t>(shared), start = reinterpret_cast<std::uintptr_t>(dynamic_shared);
  if (at % 16 != 0 || reinterpret_cast<std::uintptr_t>(global) % 16 != 0)
    misuse("cp_async_16: an address not 16-byte aligned");
  if (at < start || at + 16 > start + dynamic_shared_bytes) {
    misuse("cp_async_16: a destination outside shared memory");
    return;
  }
  pending_copies.push_back({shared, global, valid});
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {
  for (const auto& c : ::cuda_emu::pending_copies) {
    if (c.valid)
      std::memcpy(c.shared, c.global, 16);
    else
      std::memset(c.shared, 0, 16);
  }
  ::cuda_emu::pending_copies.clear();
}
