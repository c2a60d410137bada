#include "train/models/cuda_gpt_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#if defined(SLURM_TRAIN_WITH_CUDA)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/lt_matmul.h"
#include "kernels/cuda/owned_stream.h"
#include "kernels/cuda/transformer_kernels.h"
#endif

namespace slurm_train {

#if defined(SLURM_TRAIN_WITH_CUDA)
namespace {

using cuda::DeviceBuffer;

class CudaGptDecoder final : public GptDecoder {
 public:
  CudaGptDecoder(const GptConfig& config, std::span<const float> params, int gpu)
      : config_(config), layout_(gpt_layout(config)), gpu_(on_device(gpu)) {
    const std::size_t expected = layout_.back().offset + layout_.back().size;
    check_parameters(config, params.size());
    if (config.embd / config.heads > cuda::kMaxAttentionHeadSize)
      throw std::invalid_argument(
          fmt::format("gpt sampler on a GPU: head size {} (embd {} over {} heads): the "
                      "attention kernels take at most {}; use --device cpu",
                      config.embd / config.heads, config.embd, config.heads, cuda::kMaxAttentionHeadSize));
    stream_ = owned_.stream();
    lt_ = std::make_unique<cuda::LtMatmul>(false, true, 4u << 20);
    const std::size_t C = static_cast<std::size_t>(config.embd), T = static_cast<std::size_t>(config.block),
                      L = static_cast<std::size_t>(config.layers), H = static_cast<std::size_t>(config.heads),
                      V = static_cast<std::size_t>(config.vocab);
    params_.resize(expected);
    CUDA_CHECK(
        cudaMemcpyAsync(params_.data(), params.data(), expected * sizeof(float), cudaMemcpyHostToDevice, stream_));
    keys_.resize(L * T * C), values_.resize(L * T * C);
    x_.resize(C), ln_.resize(C), qkv_.resize(3 * C), att_.resize(C), proj_.resize(C), fc_.resize(4 * C),
        fch_.resize(4 * C), mean_.resize(1), rstd_.resize(1), scores_.resize(H * T), logits_.resize(V);
    token_.resize(1), host_token_.resize(1), host_logits_.resize(V);
    logits_host_.resize(V);
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // `params` may go away after this
  }
  ~CudaGptDecoder() override { cudaStreamSynchronize(stream_); }
  CudaGptDecoder(const CudaGptDecoder&) = delete;
  CudaGptDecoder& operator=(const CudaGptDecoder&) = delete;

  const std::vector<float>& feed(int token) override {
    const int C = config_.embd, V = config_.vocab, H = config_.heads;
    check_feed(config_, position_, token);
    const std::size_t c = static_cast<std::size_t>(C), p = static_cast<std::size_t>(position_);
    CUDA_CHECK(cudaSetDevice(gpu_));  // the caller may have moved to another since
    host_token_.data()[0] = token;
    CUDA_CHECK(
        cudaMemcpyAsync(token_.data(), host_token_.data(), sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    cuda::embedding_forward(1, 1, C, token_.data(), tensor(0), tensor(1) + p * c, x_.data(), stream_);
    for (int l = 0; l < config_.layers; ++l) {
      const std::size_t b = 2 + static_cast<std::size_t>(l) * 12;  // the block's first tensor (gpt_layout's order)
      const std::size_t cache = (static_cast<std::size_t>(l) * config_.block + p) * c;
      // x += c_proj(attention(c_attn(ln_1(x))))
      cuda::layernorm_forward(1, C, x_.data(), tensor(b), tensor(b + 1), ln_.data(), mean_.data(), rstd_.data(),
                              stream_);
      row(C, 3 * C, ln_.data(), tensor(b + 2), tensor(b + 3), qkv_.data());
      CUDA_CHECK(
          cudaMemcpyAsync(keys_.data() + cache, qkv_.data() + c, c * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      CUDA_CHECK(cudaMemcpyAsync(values_.data() + cache, qkv_.data() + 2 * c, c * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream_));
      const std::size_t layer_cache = static_cast<std::size_t>(l) * config_.block * c;
      cuda::attention_decode(C, H, position_ + 1, qkv_.data(), keys_.data() + layer_cache, values_.data() + layer_cache,
                             att_.data(), scores_.data(), stream_);
      row(C, C, att_.data(), tensor(b + 4), tensor(b + 5), proj_.data());
      cuda::residual_forward<float>(c, x_.data(), proj_.data(), x_.data(), stream_);
      // x += c_proj(gelu(c_fc(ln_2(x))))
      cuda::layernorm_forward(1, C, x_.data(), tensor(b + 6), tensor(b + 7), ln_.data(), mean_.data(), rstd_.data(),
                              stream_);
      row(C, 4 * C, ln_.data(), tensor(b + 8), tensor(b + 9), fc_.data());
      cuda::gelu_forward<float>(4 * c, fc_.data(), fch_.data(), stream_);
      row(4 * C, C, fch_.data(), tensor(b + 10), tensor(b + 11), proj_.data());
      cuda::residual_forward<float>(c, x_.data(), proj_.data(), x_.data(), stream_);
    }
    const std::size_t ln_f = layout_.size() - 2;
    cuda::layernorm_forward(1, C, x_.data(), tensor(ln_f), tensor(ln_f + 1), ln_.data(), mean_.data(), rstd_.data(),
                            stream_);
    // The head is tied to the token embedding: logits = ln_f(x) wte^T.
    cuda::MatmulArgs head{false, true, 1, V, C, ln_.data(), C, tensor(0), C, logits_.data(), V};
    lt_->run(head, stream_);
    CUDA_CHECK(cudaMemcpyAsync(host_logits_.data(), logits_.data(), static_cast<std::size_t>(V) * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy_n(host_logits_.data(), V, logits_host_.begin());
    ++position_;
    return logits_host_;
  }
  void reset() override { position_ = 0; }
  int position() const override { return position_; }
  const GptConfig& config() const override { return config_; }

 private:
  float* tensor(std::size_t i) { return params_.data() + layout_[i].offset; }
  // y[out] = x[in] W[in, out] + b (a Conv1D on one row).
  void row(int in, int out, const float* x, const float* w, const float* b, float* y) {
    cuda::MatmulArgs a{false, false, 1, out, in, x, in, w, out, y, out};
    a.epilogue = cuda::Epilogue::kBias;
    a.bias = const_cast<float*>(b);
    // The bias epilogue wants a 16-byte-aligned bias (the packed layout's, when embd % 4 == 0).
    if (reinterpret_cast<std::uintptr_t>(b) % 16 == 0 && lt_->supports(a)) return lt_->run(a, stream_);
    a.epilogue = cuda::Epilogue::kNone, a.bias = nullptr;
    lt_->run(a, stream_);
    cuda::bias_activation_forward<float>(kernels::Activation::kIdentity, 1, out, b, y, y, {}, stream_);
  }

  // Selects the GPU before the stream is made on it.
  static int on_device(int gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    return gpu;
  }

  GptConfig config_;
  std::vector<ParamTensor> layout_;
  int gpu_;                  // set (and selected) before owned_ makes its stream there
  cuda::OwnedStream owned_;  // before the buffers and handles: destroyed after them
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::LtMatmul> lt_;
  DeviceBuffer<float> params_, keys_, values_, x_, ln_, qkv_, att_, proj_, fc_, fch_, mean_, rstd_, scores_, logits_;
  DeviceBuffer<std::int32_t> token_;
  cuda::PinnedBuffer<std::int32_t> host_token_;
  cuda::PinnedBuffer<float> host_logits_;
  std::vector<float> logits_host_;
  int position_ = 0;
};

}  // namespace

std::unique_ptr<GptDecoder> make_cuda_gpt_decoder(const GptConfig& config, std::span<const float> params, int gpu) {
  return std::make_unique<CudaGptDecoder>(config, params, gpu);
}
#else
std::unique_ptr<GptDecoder> make_cuda_gpt_decoder(const GptConfig&, const std::vector<float>&, int) {
  throw std::runtime_error("sample on a GPU: this build has no CUDA support (nvcc was not found when it was built)");
}
#endif

}  // namespace slurm_train
