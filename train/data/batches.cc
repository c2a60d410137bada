#include "train/data/batches.h"

#include <algorithm>
#include <utility>

#include "kernels/elementwise.h"

namespace slurm_train {

std::vector<std::uint32_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::size_t n) {
  std::vector<std::uint32_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = static_cast<std::uint32_t>(i);
  std::uint64_t state = kernels::mix64(seed) ^ kernels::mix64(epoch + 0x5eed);
  for (std::size_t i = n; i > 1; --i) {
    state = kernels::mix64(state);
    // Lemire's multiply-shift: an index in [0, i) from 64 random bits.
    const auto j = static_cast<std::size_t>((static_cast<unsigned __int128>(state) * i) >> 64);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

std::size_t batches_per_epoch(std::size_t samples, std::size_t global_batch) {
  return global_batch == 0 ? 0 : samples / global_batch;
}

RowRange rank_rows(std::size_t global_batch, int rank, int world) {
  const std::size_t w = static_cast<std::size_t>(world), r = static_cast<std::size_t>(rank);
  const std::size_t base = global_batch / w, extra = global_batch % w;
  const std::size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

}  // namespace slurm_train
