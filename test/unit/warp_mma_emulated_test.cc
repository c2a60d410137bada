// The warp products of kernels/cuda/warp_mma.cuh on the CPU emulation (cuda_emulation.h): a
// 16 x 16 x 16 product whose operands ldmatrix loads from shared memory in each of the ways the
// attention kernels load them (test/cuda/warp_mma_probe.cuh: A as stored and transposed, B stored
// [n][k] and [k][n]) must equal the plain product, element for element in the documented
// accumulator layout. The emulation's ldmatrix and mma are written separately from PTX's
// layouts, so a lane or register mixed up in either shows here as a wrong product; the GPU runs
// the same kernel in test/cuda/warp_mma_test.cc.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

// First: the device code below is compiled against the emulation.
#include "test/unit/cuda_emulation.h"

#include "kernels/cuda/warp_mma.cuh"
#include "test/cuda/warp_mma_probe.cuh"
#include "test/cuda/warp_mma_probe.h"

using namespace slurm_train::cuda_test;
using slurm_train::cuda::pack_bf16x2;

TEST_CASE("warp mma (emulated): ldmatrix operands, stored either way, give the plain product") {
  const WarpMmaProbeCase c = warp_mma_probe_case();
  for (const bool a_transposed : {false, true})
    for (const bool b_kn : {false, true}) {
      CAPTURE(a_transposed);
      CAPTURE(b_kn);
      std::vector<float> d(256, -1.0f);
      cuda_emu::launch({1, 1, 1}, 32, kWarpMmaProbeSharedBytes, warp_mma_probe_kernel, c.a.data(), c.b.data(),
                       a_transposed, b_kn, d.data());
      CHECK(d == c.want);
    }
}

TEST_CASE("warp mma (emulated): pack_bf16x2 puts the first value in the low half, rounded to nearest even") {
  // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: ties to even, 1 (0x3f80).
  CHECK(pack_bf16x2(1.0f, -2.0f) == 0xc0003f80u);
  CHECK(pack_bf16x2(1.0f + 0x1p-8f, 0.0f) == 0x00003f80u);
  CHECK(pack_bf16x2(1.0f + 0x1p-8f + 0x1p-12f, 0.0f) == 0x00003f81u);
}

TEST_CASE("warp mma (emulated): ldmatrix refuses a row address that is not 16-byte aligned") {
  auto misaligned = [](int) {
    std::uint32_t r[4];
    ldmatrix_x4(r, 8);
  };
  CHECK_THROWS_WITH_AS(cuda_emu::launch({1, 1, 1}, 32, 256, misaligned, 0),
                       "cuda_emu: ldmatrix_x4: row address not 16-byte aligned", std::logic_error);
}
#endif  // SLURM_TRAIN_WITH_CUDA
