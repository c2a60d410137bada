// Warp-wide tensor-core products whose fragments' layouts PTX documents, so that a kernel can keep
// a product's result in registers and use it as the next product's operand (WMMA's fragments are
// opaque: their elements cannot be rescaled, masked or rounded in place).
//
//   mma_bf16_16816(d, a, b): d[16 x 8] += a[16 x 16] b[16 x 8] (mma.sync m16n8k16, bf16 operands,
//     fp32 accumulation). With g = lane / 4 and t = lane % 4, a lane holds
//       a[0] = A(g, 2t..2t+1), a[1] = A(g+8, 2t..), a[2] = A(g, 2t+8..), a[3] = A(g+8, 2t+8..),
//       b[0] = B(2t..2t+1, g), b[1] = B(2t+8.., g),
//       d[0..1] = D(g, 2t..2t+1), d[2..3] = D(g+8, 2t..2t+1),
//     two bf16 a 32-bit word, the lower column (row of B) in the low half.
//   ldmatrix_x4(r, row) / ldmatrix_x4_trans(r, row): four 8 x 8 bf16 matrices from shared memory,
//     lanes 8i..8i+7 giving the 16-byte aligned addresses of matrix i's rows; r[i] = M_i(g, 2t..2t+1),
//     or with _trans M_i(2t..2t+1, g). The addresses are shared_address()'s 32-bit ones: a kernel
//     computes a lane's base once and adds constant offsets, which the instruction takes as an
//     immediate (generic pointers would each be converted, and held, in registers of their own).
//
// nvcc gets the instructions; the CPU emulation (test/unit/cuda_emulation.h) defines the same
// functions for a host compiler.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace slurm_train::cuda {

// Two values as one operand word of bf16: lo in the low half, both rounded to nearest even.
__host__ __device__ inline std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  std::uint32_t word;
  std::memcpy(&word, &v, sizeof word);
  return word;
}

}  // namespace slurm_train::cuda

#if defined(__CUDACC__)
__device__ inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
#endif
