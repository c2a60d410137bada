// Gradient all-reduce in buckets, overlapped with backward: layers are grouped, last layer
// first, into buckets of about `bucket_bytes`; each bucket is a contiguous range of the gradient
// buffer, and its all-reduce starts as soon as backward has finished its lowest layer (with a
// sharded optimizer, its reduce-scatter into the ranks' shards). The optimizer waits for all of
// them just before it runs.
#pragma once

#include <cstddef>
#include <vector>

#include "train/comm.h"
#include "train/mlp.h"
#include "train/sharded_optimizer.h"

namespace slurm_train {

class GradientBuckets {
 public:
  // With `shards`, which must outlive it, each bucket is reduce-scattered into the shards.
  GradientBuckets(Comm& comm, const std::vector<LayerLayout>& layers, std::size_t bucket_bytes,
                  ShardedOptimizer* shards = nullptr);

  // Called by backward after layer `layer`'s gradients in `grads` are complete.
  void layer_done(float* grads, std::size_t layer);
  // Waits until every bucket is reduced: the gradients are then summed over all ranks.
  void finish();

  struct Bucket {
    std::size_t lowest_layer, begin, end;  // parameter range [begin, end)
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  Comm& comm_;
  ShardedOptimizer* shards_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_layer_;
};

}  // namespace slurm_train
