#include "kernels/cpu/column_sums.h"

#include <cstddef>

#include "kernels/cpu/vector_clones.h"

namespace slurm_train::kernels {

ST_VECTOR_CLONES
void add_column_sums(int rows, int cols, const float* __restrict x, float* __restrict out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[c] += x[static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + c];
}

}  // namespace slurm_train::kernels
