#include "train/steps/sharded_optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace slurm_train {

std::vector<std::size_t> shard_cuts(std::size_t parameters, int ranks, std::size_t block) {
  if (ranks < 1 || block < 1) throw std::invalid_argument("shard_cuts: at least one rank and a block of one");
  const std::size_t blocks = (parameters + block - 1) / block;
  std::vector<std::size_t> cuts(static_cast<std::size_t>(ranks) + 1, parameters);
  cuts[0] = 0;
  // Whole blocks, as even as they divide: the first `blocks % ranks` shards take one more.
  const std::size_t each = blocks / static_cast<std::size_t>(ranks), extra = blocks % static_cast<std::size_t>(ranks);
  std::size_t at = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) {
    at += each + (r < extra ? 1 : 0);
    cuts[r + 1] = std::min(parameters, at * block);
  }
  return cuts;
}

std::vector<std::size_t> shard_counts(const std::vector<std::size_t>& cuts, std::size_t begin, std::size_t end) {
  std::vector<std::size_t> counts(cuts.size() - 1, 0);
  for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
    const std::size_t from = std::max(begin, cuts[r]), to = std::min(end, cuts[r + 1]);
    if (from < to) counts[r] = to - from;
  }
  return counts;
}

ShardedOptimizer::ShardedOptimizer(Comm& comm, const OptimizerConfig& config, std::vector<LayerLayout> layers,
                                   std::size_t parameters)
    : comm_(comm),
      config_(config),
      layers_(std::move(layers)),
      rank_(static_cast<std::size_t>(comm.rank())),
      cuts_(shard_cuts(parameters, comm.size(), kernels::kSumOfSquaresBlock)),
      block_sums_((parameters + kernels::kSumOfSquaresBlock - 1) / kernels::kSumOfSquaresBlock) {
  const std::size_t n = end() - begin();
  grads_.assign(n, 0.0f);
  first_.assign(n, 0.0f);
  if (config_.kind == OptimizerKind::kAdamW) second_.assign(n, 0.0f);
}

double ShardedOptimizer::clip(kernels::Kernels<float>& k, float max_norm) {
  constexpr std::size_t kBlock = kernels::kSumOfSquaresBlock;
  std::fill(block_sums_.begin(), block_sums_.end(), 0.0);
  for (std::size_t at = begin(); at < end(); at += kBlock)
    block_sums_[at / kBlock] = k.sum_of_squares(std::min(kBlock, end() - at), grads_.data() + (at - begin()));
  // Each block's sum is one rank's and zeros: adding zeros changes no bit, whatever the order.
  comm_.allreduce_sum(block_sums_.data(), block_sums_.size());
  double sum = 0.0;
  for (double s : block_sums_) sum += s;
  const double norm = std::sqrt(sum);
  if (max_norm > 0.0f && norm > max_norm && !grads_.empty())
    k.scale(grads_.size(), static_cast<float>(max_norm / (norm + 1e-6)), grads_.data());
  return norm;
}

void ShardedOptimizer::update(kernels::Kernels<float>& k, HostVector<float>& params, float lr, std::uint64_t step) {
  apply_update(config_, layers_, k, params.data(), grads_.data(), first_.data(), second_.data(), begin(), end(), lr,
               step);
  comm_.allgather_in_place(params.data(), shard_counts(cuts_, 0, params.size()));
}

void ShardedOptimizer::gather_state(HostVector<float>& first, HostVector<float>& second) {
  const std::size_t total = cuts_.back();
  const std::vector<std::size_t> counts = shard_counts(cuts_, 0, total);
  if (rank_ == 0) first.resize(total);
  comm_.gather(first_.data(), first.data(), counts, 0);
  if (second_.empty() && config_.kind != OptimizerKind::kAdamW) return;
  if (rank_ == 0) second.resize(total);
  comm_.gather(second_.data(), second.data(), counts, 0);
}

void ShardedOptimizer::take_state(const HostVector<float>& first, const HostVector<float>& second) {
  const std::size_t total = cuts_.back();
  if (first.size() != total || (config_.kind == OptimizerKind::kAdamW && second.size() != total))
    throw std::invalid_argument("sharded optimizer: the state to take holds " + std::to_string(first.size()) +
                                " values for a model of " + std::to_string(total));
  std::copy(first.begin() + static_cast<std::ptrdiff_t>(begin()), first.begin() + static_cast<std::ptrdiff_t>(end()),
            first_.begin());
  if (config_.kind == OptimizerKind::kAdamW)
    std::copy(second.begin() + static_cast<std::ptrdiff_t>(begin()),
              second.begin() + static_cast<std::ptrdiff_t>(end()), second_.begin());
}

}  // namespace slurm_train
