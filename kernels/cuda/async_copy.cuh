// Asynchronous copies from global to shared memory (cp.async, sm_80 on): a thread issues a tile's
// loads and goes on computing; the data lands in shared memory without passing through its
// registers, which a prefetch into registers would hold across the computation.
//
//   cp_async_16(shared, global, valid): 16 bytes from global to shared (both 16-byte aligned);
//     with valid false, 16 zero bytes instead (global is not read, but must be a valid address).
//   cp_async_commit(): closes the group of copies issued since the last commit.
//   cp_async_wait_all(): waits until every copy this thread issued has landed. Other threads'
//     copies are theirs to wait for: a barrier after the wait makes them visible to all.
//
// nvcc gets the instructions; the CPU emulation (test/unit/cuda_emulation.h) defines the same
// functions for a host compiler, holding each copy back until the wait.
#pragma once

#if defined(__CUDACC__)
__device__ inline void cp_async_16(void* shared, const void* global, bool valid) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
#endif
