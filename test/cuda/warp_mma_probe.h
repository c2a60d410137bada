// Host side of warp_mma_probe.cuh on the GPU.
#pragma once

#include <vector>

namespace slurm_train::cuda_test {

// d [16][16] = a [16][16] b [16][16] (row-major, values exact in bf16) by one warp's ldmatrix and
// mma.sync, A loaded as stored or transposed, B stored [n][k] or [k][n].
std::vector<float> warp_mma_probe(const std::vector<float>& a, const std::vector<float>& b, bool a_transposed,
                                  bool b_kn);

}  // namespace slurm_train::cuda_test
