// The warp products of kernels/cuda/warp_mma.cuh on the GPU: the fragment layouts the attention
// kernels rely on, each way they load an operand, against the plain product. The same device code
// runs on the CPU emulation in test/unit/warp_mma_emulated_test.cc; where the GPU disagrees with
// it, the emulation's layouts (and so every kernel test that passed on it) are wrong, and this
// test says which load.
#include <doctest/doctest.h>

#include <vector>

#include "test/cuda/cuda_test_support.h"
#include "test/cuda/warp_mma_probe.h"

using namespace slurm_train::cuda_test;

TEST_CASE("cuda warp mma: ldmatrix operands, stored either way, give the plain product" * doctest::skip(no_gpu())) {
  const WarpMmaProbeCase c = warp_mma_probe_case();
  for (const bool a_transposed : {false, true})
    for (const bool b_kn : {false, true}) {
      CAPTURE(a_transposed);
      CAPTURE(b_kn);
      CHECK(warp_mma_probe(c.a, c.b, a_transposed, b_kn) == c.want);
    }
}
