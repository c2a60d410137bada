// The warp products of kernels/cuda/warp_mma.cuh on the CPU emulation (cuda_emulation.h): a
// 16 x 16 x 16 product whose operands ldmatrix loads from shared memory in each of the ways the
// attention kernels load them (A as stored and transposed, B stored [n][k] and [k][n]) must equal
// the plain product, element for element in the documented accumulator layout. The emulation's
// ldmatrix and mma are written separately from PTX's layouts, so a lane or register mixed up in
// either shows here as a wrong product.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test/cuda/cuda_test_support.h"
#include "test/unit/cuda_emulation.h"
#include "kernels/cuda/warp_mma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using slurm_train::cuda::pack_bf16x2;
constexpr int kLd = 24;  // 48-byte rows: 16-byte aligned, as ldmatrix needs

// One warp: A [16][16] and B [16 k][16 n] into shared memory (each stored as asked), the
// product's two n-tiles by mma, written out as d[16][16].
__global__ void product_kernel(const float* a, const float* b, bool a_transposed, bool b_kn, float* d) {
  bf16* sa = reinterpret_cast<bf16*>(::cuda_emu::dynamic_shared);
  bf16* sb = sa + 16 * kLd;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32) {
    const int r = i / 16, c = i % 16;
    sa[a_transposed ? c * kLd + r : r * kLd + c] = __float2bfloat16(a[i]);       // A(r, c)
    sb[b_kn ? r * kLd + c : c * kLd + r] = __float2bfloat16(b[i]);               // B(k = r, n = c)
  }
  __syncwarp();
  std::uint32_t fa[4], fb[4];
  if (a_transposed)  // rows k = (lane / 16) * 8 + lane % 8, columns m = (lane / 8) % 2 * 8
    ldmatrix_x4_trans(fa, shared_address(sa + (lane / 16 * 8 + lane % 8) * kLd + lane / 8 % 2 * 8));
  else
    ldmatrix_x4(fa, shared_address(sa + (lane % 16) * kLd + lane / 16 * 8));
  if (b_kn)
    ldmatrix_x4_trans(fb, shared_address(sb + (lane / 8 % 2 * 8 + lane % 8) * kLd + lane / 16 * 8));
  else
    ldmatrix_x4(fb, shared_address(sb + (lane / 16 * 8 + lane % 8) * kLd + lane / 8 % 2 * 8));
  float acc[2][4] = {};
  const std::uint32_t first[2] = {fb[0], fb[1]}, second[2] = {fb[2], fb[3]};
  mma_bf16_16816(acc[0], fa, first);
  mma_bf16_16816(acc[1], fa, second);
  for (int j = 0; j < 2; ++j)
    for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 16 + 8 * j + 2 * t + e % 2] = acc[j][e];
}

}  // namespace

TEST_CASE("warp mma (emulated): ldmatrix operands, stored either way, give the plain product") {
  using slurm_train::cuda_test::uniform;
  // Values exact in bf16 (multiples of 1/8 up to 2), so the product is exact in fp32.
  auto exact = [](std::vector<float> v) {
    for (float& x : v) x = std::round(x * 8.0f) / 8.0f;
    return v;
  };
  const auto a = exact(uniform<float>(256, 3, -2.0, 2.0)), b = exact(uniform<float>(256, 4, -2.0, 2.0));
  std::vector<float> want(256, 0.0f);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k) want[i * 16 + j] += a[i * 16 + k] * b[k * 16 + j];
  for (const bool a_transposed : {false, true})
    for (const bool b_kn : {false, true}) {
      CAPTURE(a_transposed);
      CAPTURE(b_kn);
      std::vector<float> d(256, -1.0f);
      cuda_emu::launch({1, 1, 1}, 32, 2 * 16 * kLd * sizeof(bf16), product_kernel, a.data(), b.data(), a_transposed,
                       b_kn, d.data());
      CHECK(d == want);
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
