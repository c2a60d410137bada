// Gradient all-reduce in buckets, overlapped with backward: layers are grouped, last layer
// first, into buckets of about `bucket_bytes`; each bucket is a contiguous range of the gradient
// buffer, and its all-reduce starts as soon as backward has finished its lowest layer (with a
// sharded optimizer, its reduce-scatter into the ranks' shards). The optimizer waits for all of
// them just before it runs.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "train/comm/comm.h"
#include "train/models/mlp.h"

namespace slurm_train {

// A sharded optimizer's gradients (sharded_optimizer.h): where its shards of the packed
// parameters begin (shard_cuts), this rank, and the sum of this rank's shard (memory of the
// Comm's kind: host for MPI, device for NCCL), which must outlive the buckets.
struct GradientShard {
  std::vector<std::size_t> cuts;
  int rank = 0;
  float* grads = nullptr;  // [cuts[rank], cuts[rank + 1])
};

class GradientBuckets {
 public:
  // With `shard`, each bucket is reduce-scattered into the ranks' shards instead of all-reduced.
  GradientBuckets(Comm& comm, const std::vector<LayerLayout>& layers, std::size_t bucket_bytes,
                  std::optional<GradientShard> shard = std::nullopt);

  // Called by backward after layer `layer`'s gradients in `grads` are complete.
  void layer_done(float* grads, std::size_t layer);
  // Waits until every bucket is reduced: the gradients are then summed over all ranks.
  void finish();

  struct Bucket {
    std::size_t lowest_layer, begin, end;  // parameter range [begin, end)
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void start_reduce_scatter(const float* grads, const Bucket& b);

  Comm& comm_;
  std::optional<GradientShard> shard_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_layer_;
};

}  // namespace slurm_train
