#include "train/gradient_buckets.h"

namespace slurm_train {

GradientBuckets::GradientBuckets(Comm& comm, const std::vector<LayerLayout>& layers, std::size_t bucket_bytes,
                                 ShardedOptimizer* shards)
    : comm_(comm), shards_(shards), bucket_of_layer_(layers.size()) {
  // Walk layers in backward order (last first), closing a bucket once it holds bucket_bytes.
  for (std::size_t l = layers.size(); l-- > 0;) {
    const bool open = !buckets_.empty() &&
                      (buckets_.back().end - buckets_.back().begin) * sizeof(float) < bucket_bytes;
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
    if (shards_) shards_->start_bucket(grads, b.begin, b.end);
    else comm_.start_allreduce_sum(grads + b.begin, b.end - b.begin);
  }
  comm_.progress();
}

void GradientBuckets::finish() { comm_.wait_all(); }

}  // namespace slurm_train
