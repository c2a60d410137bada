// Global batches that do not depend on the world size. Each epoch has one permutation of the
// training set, drawn from (seed, epoch); global batch k is the next B samples of it, and rank
// r of W takes an exact slice of it. Training with the same seed and B on 1, 2 or 4 ranks
// therefore sees the same global batches, and the same per-sample dropout masks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace slurm_train {

// A permutation of [0, n) that depends only on (seed, epoch): a Fisher-Yates shuffle driven by
// splitmix64, so that it is the same on every platform and standard library.
std::vector<std::uint32_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::size_t n);

// Full global batches in one epoch (the last partial batch is dropped, so that every step has
// the same global batch and loss scale).
std::size_t batches_per_epoch(std::size_t samples, std::size_t global_batch);

// Rows [begin, end) of a global batch that rank `rank` of `world` takes: an exact split, the
// first B % W ranks taking one row more.
struct RowRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};
RowRange rank_rows(std::size_t global_batch, int rank, int world);

}  // namespace slurm_train
