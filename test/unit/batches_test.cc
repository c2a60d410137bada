#include "train/data/batches.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace slurm_train;

TEST_CASE("batches: an epoch permutation is a permutation, fixed by seed and epoch") {
  const auto p = epoch_permutation(42, 3, 1000);
  std::vector<std::uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0u);
  CHECK(sorted == identity);
  CHECK(p != identity);
  CHECK(epoch_permutation(42, 3, 1000) == p);
  CHECK(epoch_permutation(42, 4, 1000) != p);
  CHECK(epoch_permutation(43, 3, 1000) != p);
}

TEST_CASE("batches: the permutation is pinned (same on every platform and library)") {
  // Any change to the shuffle changes every run's batches: this guards against that.
  CHECK(epoch_permutation(1, 0, 8) == std::vector<std::uint32_t>{3, 6, 2, 0, 5, 7, 4, 1});
}

TEST_CASE("batches: rank slices split a global batch exactly, whatever the world size") {
  for (std::size_t batch : {1u, 7u, 256u, 1000u}) {
    for (int world : {1, 2, 3, 4, 7}) {
      if (batch < static_cast<std::size_t>(world)) continue;
      std::size_t next = 0, smallest = batch, largest = 0;
      for (int r = 0; r < world; ++r) {
        const RowRange rows = rank_rows(batch, r, world);
        CHECK(rows.begin == next);
        next = rows.end;
        smallest = std::min(smallest, rows.size());
        largest = std::max(largest, rows.size());
      }
      CHECK(next == batch);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(rank_rows(10, 0, 4).size() == 3);
  CHECK(rank_rows(10, 3, 4).size() == 2);
}

TEST_CASE("batches: full batches only") {
  CHECK(batches_per_epoch(60000, 256) == 234);
  CHECK(batches_per_epoch(100, 100) == 1);
  CHECK(batches_per_epoch(99, 100) == 0);
  CHECK(batches_per_epoch(10, 0) == 0);
}
