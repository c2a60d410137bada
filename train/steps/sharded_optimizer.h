// The optimizer state sharded over the ranks (ZeRO stage 1, train.shard_optimizer): rank r keeps
// the moments of parameters [cut[r], cut[r+1]) only, so optimizer memory per rank is 1/N of the
// replicated path's. A step:
//   backward    each gradient bucket is reduce-scattered as soon as it is complete: rank r
//               receives the bucket's sum over the ranks for its own parameters only
//   clip        the global norm from every rank's sums of squares of its shard, per block
//   update      each rank updates its shard of the parameters, then all-gathers the parameters
//
// The numerics are the replicated path's, bit for bit, by these rules:
//   - a gradient element is the sum of the ranks' contributions; on two ranks that is one
//     addition, the same bits whichever collective adds them (IEEE addition is commutative). On
//     three or more, Open MPI's reduce-scatter and all-reduce may associate the sum differently,
//     and the two paths agree within the bound between world sizes, not bit for bit.
//   - the norm: shards start at multiples of kernels::kSumOfSquaresBlock, each rank sums the
//     squares of its whole blocks, and every rank adds all blocks' sums in block order from 0.0,
//     which is what the cpu kernels' sum_of_squares of the whole gradient does;
//   - clipping and the update are element-wise, the same per element on a shard as on the whole.
// Checkpoints hold the whole state: rank 0 gathers the moments before each save (checkpoint
// files are the replicated path's), and a resume on any number of ranks cuts them anew.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/kernels.h"
#include "train/comm/comm.h"
#include "train/models/mlp.h"
#include "train/steps/gradient_buckets.h"
#include "train/steps/optimizer.h"

namespace slurm_train {

// Where the shards of `parameters` begin over `ranks` ranks: cut[0] = 0, cut[ranks] = parameters,
// every cut a multiple of `block`, as even as that allows (a shard may be empty). Pure.
std::vector<std::size_t> shard_cuts(std::size_t parameters, int ranks, std::size_t block);

// How many elements of [begin, end) fall in each rank's shard. Pure.
std::vector<std::size_t> shard_counts(const std::vector<std::size_t>& cuts, std::size_t begin, std::size_t end);

class ShardedOptimizer {
 public:
  // `comm` must outlive it.
  ShardedOptimizer(Comm& comm, const OptimizerConfig& config, std::vector<LayerLayout> layers, std::size_t parameters);

  std::size_t begin() const { return cuts_[rank_]; }
  std::size_t end() const { return cuts_[rank_ + 1]; }
  const std::vector<std::size_t>& cuts() const { return cuts_; }

  // Where the gradient buckets reduce-scatter into (gradient_buckets.h).
  GradientShard gradient_shard() { return {cuts_, static_cast<int>(rank_), grads_.data()}; }
  // Waits for every bucket started.
  void finish_gradients() { comm_.wait_all(); }
  // The global gradient norm (the same on every rank), and this shard's gradients scaled to
  // `max_norm` when above it (max_norm > 0).
  double clip(kernels::Kernels<float>& k, float max_norm);
  // Updates this rank's shard of `params`, then gathers every rank's shard into `params`.
  void update(kernels::Kernels<float>& k, HostVector<float>& params, float lr, std::uint64_t step);

  // The whole moments on rank 0 (`first` and `second` sized to the model there; SGD: no second),
  // from every rank's shard. Collective.
  void gather_state(HostVector<float>& first, HostVector<float>& second);
  // This rank's shard of whole moments every rank holds (a resume's broadcast).
  void take_state(const HostVector<float>& first, const HostVector<float>& second);
  // This rank's shard of the moments (SGD: `second` empty).
  const HostVector<float>& first() const { return first_; }
  const HostVector<float>& second() const { return second_; }
  // Bytes of optimizer state this rank holds.
  std::size_t state_bytes() const { return (first_.size() + second_.size()) * sizeof(float); }

 private:
  Comm& comm_;
  OptimizerConfig config_;
  std::vector<LayerLayout> layers_;
  std::size_t rank_;
  std::vector<std::size_t> cuts_;
  std::vector<float> grads_;  // this shard's
  HostVector<float> first_, second_;
  std::vector<double> block_sums_;  // every block of the model's, for the norm
};

}  // namespace slurm_train
