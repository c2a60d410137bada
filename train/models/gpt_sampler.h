// Text generation with the GPT model of train/models/gpt.h, one token at a time.
//
// GptDecoder runs one position at a time with a KV cache: GptSampler here on the CPU, and
// train/models/cuda_gpt_sampler.h's on a GPU. GptSampler runs one position through the model per feed(), keeping every
// earlier position's keys and values (a KV cache, [T, C] per layer), so that a token costs one matrix-vector product
// per weight matrix instead of a forward pass over the whole context. Its logits equal Gpt::forward's at the same
// position up to float rounding (test/unit/gpt_sampler_test.cc). The products are plain loops in a fixed order rather
// than BLAS, whose kernel and summation order depend on the CPU: the same parameters and tokens give the same logits,
// and so the same text, on every machine.
//
// sample_text() generates bytes: a token is a byte (vocab 256). The context window is the
// model's block size T:
//   - a prompt longer than T - 1 bytes is cut to its last T - 1 bytes (so that the first
//     generated token still fits the cache);
//   - an empty prompt starts from the token '\n';
//   - when the cache holds T tokens and another must be fed, the cache is rebuilt from the last
//     T / 2 tokens of the context (the new one the last of them; at least that one), and
//     generation goes on from there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/models/gpt.h"

namespace slurm_train {

class GptDecoder {
 public:
  virtual ~GptDecoder() = default;
  // Runs `token` (in [0, vocab)) at position position() and returns the logits [vocab] of the
  // next token; the reference stays valid until the next feed(). Throws std::invalid_argument
  // for a token outside the vocabulary and std::logic_error when the cache already holds block
  // tokens (the caller decides what the window becomes: reset() and feed again).
  virtual const std::vector<float>& feed(int token) = 0;
  // Forgets every cached position.
  virtual void reset() = 0;
  // How many tokens are cached.
  virtual int position() const = 0;
  virtual const GptConfig& config() const = 0;

 protected:
  // Throws std::invalid_argument when `count` parameters do not match gpt_layout(config).
  static void check_parameters(const GptConfig& config, std::size_t count);
  // Throws as feed() says for `token` at `position`.
  static void check_feed(const GptConfig& config, int position, int token);
};

class GptSampler final : public GptDecoder {
 public:
  // params: packed in gpt_layout(config) order, as Gpt::params(); copied. Throws
  // std::invalid_argument when their count does not match the layout.
  GptSampler(const GptConfig& config, std::span<const float> params);
  // The same, sharing `params` (never written) with other samplers: one copy of the weights for
  // many texts generated at once.
  GptSampler(const GptConfig& config, std::shared_ptr<const HostVector<float>> params);

  const std::vector<float>& feed(int token) override;
  void reset() override { position_ = 0; }
  int position() const override { return position_; }
  const GptConfig& config() const override { return config_; }

 private:
  struct LayerWeights {
    const float *ln1_w, *ln1_b, *attn_w, *attn_b, *attn_proj_w, *attn_proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *mlp_proj_w,
        *mlp_proj_b;
  };
  void attend(int layer);

  GptConfig config_;
  std::shared_ptr<const HostVector<float>> params_;
  std::vector<float> wte_t_;  // wte transposed, [C, V], for the head's product in axpy order
  const float *wte_, *wpe_, *lnf_w_, *lnf_b_;
  std::vector<LayerWeights> layers_;
  int position_ = 0;
  std::vector<float> keys_, values_;  // [layers, T, C] each
  std::vector<float> x_, ln_, qkv_, att_, proj_, fc_, scores_, logits_;
};

struct SampleOptions {
  int tokens = 256;          // how many to generate
  double temperature = 1.0;  // 0: greedy (arg-max); otherwise softmax(logits / temperature)
  std::uint64_t seed = 0;    // the draws depend on (seed, index of the generated token) alone
  int top_k = 0;             // draw among the top_k most likely tokens; 0: among all
};

// Throws std::invalid_argument, naming the value, for a vocab other than 256, a negative token
// count, a temperature negative or not finite, or a top_k outside [0, vocab]: what sample_text
// refuses, for a caller that checks before it prints or loads anything.
void check_sample_inputs(const GptConfig& config, const SampleOptions& options);

// Generates options.tokens bytes after `prompt` (see the window rules above) and returns them
// (without the prompt); on_text, when given, receives each byte as it is generated. Throws
// std::invalid_argument, before generating anything, for a vocab other than 256, params that do
// not match the layout, a negative token count, a temperature negative or not finite, or a
// top_k outside [0, vocab].
std::string sample_text(const GptConfig& config, std::span<const float> params, std::string_view prompt,
                        const SampleOptions& options, const std::function<void(std::string_view)>& on_text = {});
// The same with a decoder of the caller's, on the CPU or a GPU (reset() first).
std::string sample_text(GptDecoder& decoder, std::string_view prompt, const SampleOptions& options,
                        const std::function<void(std::string_view)>& on_text = {});

}  // namespace slurm_train
