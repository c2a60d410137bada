// The warp products of kernels/cuda/warp_mma.cuh on the GPU: the fragment layouts the attention
// kernels rely on, each way they load an operand, against the plain product. The same device code
// runs on the CPU emulation in test/unit/warp_mma_emulated_test.cc; where the GPU disagrees with
// it, the emulation's layouts (and so every kernel test that passed on it) are wrong, and this
// test says which load.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "test/cuda/cuda_test_support.h"
#include "test/cuda/warp_mma_probe.h"

using namespace slurm_train::cuda_test;

TEST_CASE("cuda warp mma: ldmatrix operands, stored either way, give the plain product" * doctest::skip(no_gpu())) {
  // Multiples of 1/8 up to 2: exact in bf16, and every product and sum exact in fp32.
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
      CHECK(warp_mma_probe(a, b, a_transposed, b_kn) == want);
    }
}
