// The vectorized column sums against the plain loop, bit for bit: each column summed in row order.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/column_sums.h"
#include "kernels/elementwise.h"

using namespace slurm_train;

TEST_CASE("add_column_sums: the plain loop's bits, for widths around the vector lanes, added into out") {
  for (const int cols : {1, 7, 8, 9, 16, 17, 37, 384}) {
    for (const int rows : {0, 1, 3, 300}) {
      std::vector<float> x(static_cast<std::size_t>(rows) * cols);
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>(kernels::mix64(i * 7919 + static_cast<std::size_t>(cols)) % 200001) / 1e5f - 1.0f;
      std::vector<float> want(static_cast<std::size_t>(cols));
      for (int c = 0; c < cols; ++c) want[c] = 0.25f * static_cast<float>(c);
      std::vector<float> got = want;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) want[c] += x[static_cast<std::size_t>(r) * cols + c];
      kernels::add_column_sums(rows, cols, x.data(), got.data());
      CAPTURE(rows);
      CAPTURE(cols);
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
  }
}
