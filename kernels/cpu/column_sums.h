// The sums of a row-major matrix's columns, added into a row: a bias's gradient. Each column is
// summed in row order, as the plain loop does; the vector clones add many columns at once, so
// every vector width gives the same bits.
#pragma once

namespace slurm_train::kernels {

// out[c] += x[0][c] + x[1][c] + ... + x[rows-1][c], in that order, for c in [0, cols).
// x and out must not overlap.
void add_column_sums(int rows, int cols, const float* x, float* out);

}  // namespace slurm_train::kernels
