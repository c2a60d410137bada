// The optimizer's side of a GPU training step (see device_optimizer.h).
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "train/steps/device_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "train/steps/sharded_optimizer.h"

namespace slurm_train {

DeviceOptimizer::DeviceOptimizer(const OptimizerConfig& config, DeviceParameters layout, bool bf16_copy,
                                 cudaStream_t stream, std::span<const float> initial)
    : config_(config), layout_(std::move(layout)), bf16_copy_(bf16_copy), stream_(stream) {
  const std::size_t n = layout_.device_count;
  if (initial.size() != layout_.host_count)
    throw std::invalid_argument(
        fmt::format("GPU step: {} initial parameters for a model of {}", initial.size(), layout_.host_count));
  shard_end_ = n;
  // Zero first: the padding between the tensors stays zero, and so does its gradient.
  for (auto* b : {&params_, &grads_}) {
    b->resize(n);
    CUDA_CHECK(cudaMemsetAsync(b->data(), 0, n * sizeof(float), stream_));
  }
  upload(initial, params_.data(), 0, n);
  if (bf16_copy_) {
    working_.resize(n);
    cuda::cast(n, params_.data(), working_.data(), stream_);
  }
  partials_.resize(cuda::norm_blocks(n)), norm_sq_.resize(1), clip_.resize(1), host_norm_sq_.resize(1);
  host_params_.assign(initial.begin(), initial.end());
  host_first_.assign(layout_.host_count, 0.0f);
  if (has_second_moment()) host_second_.assign(layout_.host_count, 0.0f);
  wait();  // `initial` may go away after this
}

DeviceOptimizer::~DeviceOptimizer() {
  // The queued work before the buffers it uses are freed.
  cudaStreamSynchronize(stream_);
}

void DeviceOptimizer::reduce_with(Comm& comm, double bucket_mb, bool shard) {
  if (buckets_) throw std::logic_error("GPU step: its gradients are reduced through a Comm already");
  const auto bucket_bytes = static_cast<std::size_t>(bucket_mb * 1024 * 1024);
  if (!shard) {
    buckets_ = std::make_unique<GradientBuckets>(comm, layout_.units, bucket_bytes);
    return;
  }
  if (moments_ready_)
    throw std::logic_error(
        "GPU step: the optimizer state sharded after an update or a state transfer; it must be sharded before "
        "either");
  // A checkpoint's shard is a range of the packed layout: a padded device layout has none.
  if (layout_.device_count != layout_.host_count)
    throw std::logic_error("GPU step: the optimizer state is sharded on the packed layout only");
  const std::size_t n = layout_.device_count;
  cuts_ = shard_cuts(n, comm.size(), kernels::kSumOfSquaresBlock);
  static_assert(cuda::kNormBlock == kernels::kSumOfSquaresBlock);
  const std::size_t rank = static_cast<std::size_t>(comm.rank());
  shard_begin_ = cuts_[rank], shard_end_ = cuts_[rank + 1];
  grad_shard_ = cuda::DeviceBuffer<float>(std::max<std::size_t>(shard_size(), 1));
  layout_.runs = runs_within(layout_.runs, shard_begin_, shard_end_);
  shard_comm_ = &comm;
  allocate_moments();
  buckets_ = std::make_unique<GradientBuckets>(comm, layout_.units, bucket_bytes,
                                               GradientShard{cuts_, comm.rank(), grad_shard_.data()});
}

// The moments, zero, allocated at their first use: once the shard is known, a sharded step never
// holds the whole moments, not even while it starts (SGD: no second moment at all). At least one
// float, so that an empty shard's pointers are valid ones.
void DeviceOptimizer::allocate_moments() {
  if (moments_ready_) return;
  const std::size_t count = std::max<std::size_t>(shard_size(), 1);
  for (cuda::DeviceBuffer<float>* b : {&m_, &v_}) {
    if (b == &v_ && !has_second_moment()) break;
    *b = cuda::DeviceBuffer<float>(count);
    CUDA_CHECK(cudaMemsetAsync(b->data(), 0, count * sizeof(float), stream_));
  }
  moments_ready_ = true;
}

// Sharded, each rank sums its blocks and the ranks add the blocks' sums: zeros in the other
// ranks' blocks add no rounding, so every rank holds the replicated path's sums bit for bit, and
// both add them in the same order.
void DeviceOptimizer::queue_clip(bool norm_wanted) {
  if (!norm_wanted && config_.clip_norm <= 0.0f) return;
  const std::size_t n = layout_.device_count, blocks = cuda::norm_blocks(n);
  if (sharded()) {
    CUDA_CHECK(cudaMemsetAsync(partials_.data(), 0, blocks * sizeof(double), stream_));
    cuda::block_sums_of_squares(shard_size(), grad_shard_.data(), partials_.data() + shard_begin_ / cuda::kNormBlock,
                                stream_);
    shard_comm_->allreduce_sum(partials_.data(), blocks);
    cuda::sum_in_order(blocks, partials_.data(), norm_sq_.data(), stream_);
  } else {
    cuda::sum_of_squares(n, grads_.data(), partials_.data(), norm_sq_.data(), stream_);
  }
  if (config_.clip_norm > 0.0f) cuda::clip_factor(norm_sq_.data(), config_.clip_norm, clip_.data(), stream_);
}

double DeviceOptimizer::clip() {
  queue_clip(true);
  CUDA_CHECK(cudaMemcpyAsync(host_norm_sq_.data(), norm_sq_.data(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
  wait();
  return std::sqrt(host_norm_sq_.data()[0]);
}

void DeviceOptimizer::update(float lr, std::uint64_t step) {
  allocate_moments();
  const float* factor = config_.clip_norm > 0.0f ? clip_.data() : nullptr;
  const bool adamw = config_.kind == OptimizerKind::kAdamW;
  const auto pass = [&](std::size_t count, std::size_t at, const float* g, std::size_t local, float decay,
                        const cuda::DecayFreeRanges& no_decay, cuda::bf16* copy) {
    if (adamw) {
      const kernels::AdamWParams h{lr, config_.beta1, config_.beta2, config_.eps, decay, static_cast<long>(step + 1)};
      cuda::adamw_update(count, params_.data() + at, g, m_.data() + local, v_.data() + local, h, no_decay, factor, copy,
                         stream_);
    } else {
      const kernels::SgdParams h{lr, config_.momentum, decay, config_.nesterov};
      cuda::sgd_update(count, params_.data() + at, g, m_.data() + local, h, no_decay, factor, copy, stream_);
    }
  };
  shard_on_host_ = false;
  if (!sharded()) {
    // One pass over every parameter where the undecayed runs are few (the MLP's biases): the
    // kernel checks each element against every range. Otherwise one pass per run (the GPT's many
    // vectors). The same arithmetic either way.
    constexpr int kOnePassRanges = 8;
    static_assert(kOnePassRanges <= cuda::DecayFreeRanges::kMax);
    cuda::DecayFreeRanges no_decay;
    bool one_pass = true;
    for (const DecayRun& run : layout_.runs) {
      if (run.decay) continue;
      if (no_decay.count == kOnePassRanges) {
        one_pass = false;
        break;
      }
      no_decay.begin[no_decay.count] = run.begin, no_decay.end[no_decay.count] = run.end, ++no_decay.count;
    }
    if (one_pass) {
      pass(layout_.device_count, 0, grads_.data(), 0, config_.weight_decay, no_decay, working());
      return;
    }
  }
  const float* g = sharded() ? grad_shard_.data() : grads_.data();
  for (const DecayRun& run : layout_.runs) {
    const std::size_t local = run.begin - shard_begin_;
    cuda::bf16* copy = bf16_copy_ && !sharded() ? working_.data() + run.begin : nullptr;
    pass(run.end - run.begin, run.begin, g + local, local, run.decay ? config_.weight_decay : 0.0f, {}, copy);
  }
  if (!sharded()) return;
  const std::size_t n = layout_.device_count;
  shard_comm_->allgather_in_place(params_.data(), shard_counts(cuts_, 0, n));
  if (bf16_copy_) cuda::cast(n, params_.data(), working_.data(), stream_);
}

HostState DeviceOptimizer::host_state() {
  if (sharded()) {
    // What a resume reads into (rank 0) and broadcasts (every rank), sized for it.
    // Zeros where they are new: a fresh start's moments, on ranks that a resume sends nothing.
    host_first_.resize(layout_.host_count, 0.0f);
    host_second_.resize(has_second_moment() ? layout_.host_count : 0, 0.0f);
  }
  return {&host_params_, &host_first_, &host_second_};
}

void DeviceOptimizer::state_to_host() {
  allocate_moments();
  const std::size_t n = layout_.device_count;
  download(params_.data(), 0, n, host_params_);
  if (!sharded()) {
    download(m_.data(), 0, n, host_first_);
    if (has_second_moment()) download(v_.data(), 0, n, host_second_);
    wait();
    return;
  }
  wait();
  // The whole moments on rank 0 (the end of a run), from every rank's shard, through the
  // gradients' buffer: sharded, the update reads the gradients' shard only, and the next backward
  // pass overwrites the buffer.
  const bool root = shard_comm_->rank() == 0;
  const std::vector<std::size_t> counts = shard_counts(cuts_, 0, n);
  const auto gather = [&](const cuda::DeviceBuffer<float>& shard, HostVector<float>& to) {
    shard_comm_->gather(shard.data(), grads_.data(), counts, 0);
    if (!root) return;
    download(grads_.data(), 0, n, to);
    wait();
  };
  gather(m_, host_first_);
  if (has_second_moment()) gather(v_, host_second_);
}

void DeviceOptimizer::state_from_host() {
  allocate_moments();
  const std::size_t n = layout_.device_count;
  upload(host_params_, params_.data(), 0, n);
  upload(host_first_, m_.data(), shard_begin_, shard_end_);
  if (has_second_moment()) upload(host_second_, v_.data(), shard_begin_, shard_end_);
  if (bf16_copy_) cuda::cast(n, params_.data(), working_.data(), stream_);
  wait();  // the host vectors may change after this
  shard_on_host_ = false;
  if (sharded()) {
    // The shard holds it now: the whole moments are staged again only for a resume or the end.
    HostVector<float>().swap(host_first_);
    HostVector<float>().swap(host_second_);
  }
}

void DeviceOptimizer::shard_to_host() {
  if (!sharded() || shard_on_host_) return;
  allocate_moments();
  download(params_.data(), 0, layout_.device_count, host_params_);
  // The packed layout (sharded only on it): the shard's device range is its host range.
  const auto shard_of = [&](const cuda::DeviceBuffer<float>& from, HostVector<float>& to) {
    to.resize(shard_size());
    if (!to.empty())
      CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), to.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  };
  shard_of(m_, host_shard_first_);
  if (has_second_moment()) shard_of(v_, host_shard_second_);
  wait();
  shard_on_host_ = true;
}

std::optional<StateShard> DeviceOptimizer::state_shard() {
  if (!sharded()) return std::nullopt;
  if (!shard_on_host_)
    throw std::logic_error(
        "GPU step: state_shard() before shard_to_host() copied the shard to host memory since the last update");
  return StateShard{shard_begin_, shard_end_, &host_params_, &host_shard_first_, &host_shard_second_};
}

std::size_t DeviceOptimizer::state_bytes() const {
  return shard_size() * sizeof(float) * (has_second_moment() ? 2 : 1);
}

HostVector<float> DeviceOptimizer::parameters() {
  HostVector<float> out;
  download(params_.data(), 0, layout_.device_count, out);
  wait();
  return out;
}

std::vector<float> DeviceOptimizer::gradients() {
  std::vector<float> out;
  download(grads_.data(), 0, layout_.device_count, out);
  wait();
  return out;
}

// The parts of the spans within the device range [begin, end) of a buffer that starts at `begin`.
template <class Vector>
void DeviceOptimizer::download(const float* from, std::size_t begin, std::size_t end, Vector& to) {
  to.resize(layout_.host_count);
  for (const DeviceSpan& s : spans_within(layout_.spans, begin, end))
    CUDA_CHECK(
        cudaMemcpyAsync(to.data() + s.host, from + s.device, s.count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
}

void DeviceOptimizer::upload(std::span<const float> from, float* to, std::size_t begin, std::size_t end) {
  if (from.size() != layout_.host_count)
    throw std::invalid_argument(
        fmt::format("GPU step: a state of {} values for a model of {}", from.size(), layout_.host_count));
  for (const DeviceSpan& s : spans_within(layout_.spans, begin, end))
    CUDA_CHECK(
        cudaMemcpyAsync(to + s.device, from.data() + s.host, s.count * sizeof(float), cudaMemcpyHostToDevice, stream_));
}

void DeviceOptimizer::wait() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace slurm_train
#endif  // SLURM_TRAIN_WITH_CUDA
