// Host side of warp_mma_probe.cuh on the GPU.
#pragma once

#include <vector>

namespace slurm_train::cuda_test {

// The probe's operands, a and b [16][16], multiples of 1/8 in [-2, 2] (exact in bf16, and every
// product and sum exact in fp32), and their plain product.
struct WarpMmaProbeCase {
  std::vector<float> a, b, want;
};
inline WarpMmaProbeCase warp_mma_probe_case() {
  WarpMmaProbeCase c{std::vector<float>(256), std::vector<float>(256), std::vector<float>(256, 0.0f)};
  for (int i = 0; i < 256; ++i) {
    c.a[i] = static_cast<float>((i * 37 + 5) % 33 - 16) / 8.0f;
    c.b[i] = static_cast<float>((i * 53 + 11) % 33 - 16) / 8.0f;
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k) c.want[i * 16 + j] += c.a[i * 16 + k] * c.b[k * 16 + j];
  return c;
}

// d [16][16] = a [16][16] b [16][16] (row-major, values exact in bf16) by one warp's ldmatrix and
// mma.sync, A loaded as stored or transposed, B stored [n][k] or [k][n].
std::vector<float> warp_mma_probe(const std::vector<float>& a, const std::vector<float>& b, bool a_transposed,
                                  bool b_kn);

}  // namespace slurm_train::cuda_test
