#include "train/steps/gradient_buckets.h"

#include <algorithm>

#include "train/steps/sharded_optimizer.h"

namespace slurm_train {

GradientBuckets::GradientBuckets(Comm& comm, const std::vector<LayerLayout>& layers, std::size_t bucket_bytes,
                                 std::optional<GradientShard> shard)
    : comm_(comm), shard_(std::move(shard)), bucket_of_layer_(layers.size()) {
  // Walk layers in backward order (last first), closing a bucket once it holds bucket_bytes.
  for (std::size_t l = layers.size(); l-- > 0;) {
    const bool open = !buckets_.empty() && (buckets_.back().end - buckets_.back().begin) * sizeof(float) < bucket_bytes;
    if (open) {
      buckets_.back().begin = layers[l].begin();
      buckets_.back().lowest_layer = l;
    } else {
      buckets_.push_back({l, layers[l].begin(), layers[l].end()});
    }
    bucket_of_layer_[l] = buckets_.size() - 1;
  }
}

void GradientBuckets::layer_done(float* grads, std::size_t layer) {
  const Bucket& b = buckets_[bucket_of_layer_[layer]];
  if (b.lowest_layer == layer) {
    if (shard_)
      start_reduce_scatter(grads, b);
    else
      comm_.start_allreduce_sum(grads + b.begin, b.end - b.begin);
  }
  comm_.progress();
}

void GradientBuckets::start_reduce_scatter(const float* grads, const Bucket& b) {
  const GradientShard& s = *shard_;
  const std::size_t begin = s.cuts[static_cast<std::size_t>(s.rank)],
                    end = s.cuts[static_cast<std::size_t>(s.rank) + 1];
  const std::size_t mine = std::max(b.begin, begin);
  // A bucket that misses this shard receives nothing; the pointer is still a valid one.
  float* recv = s.grads + (mine < end ? mine - begin : 0);
  comm_.start_reduce_scatter_sum(grads + b.begin, recv, shard_counts(s.cuts, b.begin, b.end));
}

void GradientBuckets::finish() { comm_.wait_all(); }

}  // namespace slurm_train
