// A decoder-only transformer of the GPT-2 family on the CPU: token and position embeddings,
// n_layer pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP (4x wide), a
// final LayerNorm, and the output head tied to the token embedding. Its parameters are named and
// shaped as GPT-2's are in PyTorch (transformers' Conv1D: a weight is [in, out], y = x W + b):
// wte [V, C], wpe [T, C], h.N.ln_1.{weight,bias}, h.N.attn.c_attn.{weight [C, 3C], bias},
// h.N.attn.c_proj.*, h.N.ln_2.*, h.N.mlp.c_fc.{weight [C, 4C], bias}, h.N.mlp.c_proj.*,
// ln_f.*. GELU is the exact (erf) form, as torch.nn.GELU(). Dropout, when training asks for
// it, applies to the embeddings' sum and to the output of each block's two residual branches
// (after attn.c_proj and mlp.c_proj), as nanoGPT's; not to the attention weights.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "train/models/mlp.h"
#include "train/models/param_tensor.h"

namespace slurm_train {

struct GptConfig {
  int vocab = 256;  // V
  int block = 256;  // T: the longest sequence (rows of wpe)
  int layers = 4;   // n_layer
  int heads = 4;    // n_head
  int embd = 128;   // C, a multiple of heads
};

// Every parameter tensor, in order, packed into one buffer.
std::vector<ParamTensor> gpt_layout(const GptConfig& config);

// GPT-2's initialisation, from the seed alone: weights normal(0, 0.02) (the residual
// projections' 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1.
void gpt_initialize(const GptConfig& config, std::uint64_t seed, HostVector<float>& params);

// The optimizer's view of the layout (train/steps/optimizer.h decays a LayerLayout's weights, not its
// biases): matrices (the embeddings included) decay, vectors (biases, LayerNorm) do not.
std::vector<LayerLayout> gpt_decay_layout(const std::vector<ParamTensor>& layout);

// A training forward pass's dropout: probability p, masks drawn from (seed, site, global
// position): the position of token t of window w is w * T + t, so a window's masks do not depend
// on which rank or batch slice holds it.
struct GptDropout {
  float p = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t first_window = 0;  // the global index of the batch's first window
};

class Gpt {
 public:
  Gpt(const GptConfig& config, kernels::Kernels<float>& k);

  const GptConfig& config() const { return config_; }
  const std::vector<ParamTensor>& layout() const { return layout_; }
  HostVector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }

  // The mean cross-entropy of predicting targets[B,T] from tokens[B,T] (both in [0, V)); keeps
  // the activations for backward(). logits() holds [B*T, V] afterwards.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T);
  // The same as sums over the B*T predictions; backward() then gives the gradient of loss_scale
  // times the sum (a data-parallel step's 1 / (global batch * T)).
  kernels::LossResult forward_sums(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                                   float loss_scale, const GptDropout& dropout = {});
  std::span<const float> logits() const {
    return {logits_.data(),
            static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_) * static_cast<std::size_t>(config_.vocab)};
  }
  // grads() = the gradient of the last forward()'s loss (overwritten, not accumulated).
  // tensor_done(i) is called as soon as layout()[i]'s gradient is complete, in descending i: the
  // moment a gradient bucket holding it may start its all-reduce.
  void backward(const std::function<void(std::size_t tensor)>& tensor_done = {});

 private:
  struct LayerActs;
  void resize(int B, int T);
  float* param(std::size_t index) { return params_.data() + layout_[index].offset; }
  float* grad(std::size_t index) { return grads_.data() + layout_[index].offset; }

  GptConfig config_;
  kernels::Kernels<float>& k_;
  std::vector<ParamTensor> layout_;
  HostVector<float> params_;
  std::vector<float> grads_;
  int B_ = 0, T_ = 0;
  kernels::DropoutParams dropout_at(std::size_t site) const;
  // d, or the gradient through site's dropout (into `out`); `dbias` receives its column sums.
  const float* through_dropout(std::size_t site, int rows, int cols, const float* d, float* out, float* dbias);

  std::vector<std::int32_t> tokens_, targets_;
  GptDropout dropout_;
  // Activations of the last forward pass, per layer and for the ends (fc_: GELU's derivative at
  // the MLP's pre-activation, all that the backward pass needs of it).
  std::vector<float> encoded_, residual_, ln1_, ln1_mean_, ln1_rstd_, qkv_, probs_, atty_, residual2_, ln2_, ln2_mean_,
      ln2_rstd_, fc_, fch_, lnf_, lnf_mean_, lnf_rstd_, logits_, dlogits_, zeros_;
  // Scratch of one pass, kept between steps: fresh buffers of a few MB each would cost a page
  // fault per 4 KiB and a clearing pass, every step.
  std::vector<float> projected_, dropped_, dres_, dbranch_, dln_, dwide_, dqkv_, datty_, attention_scratch_;
};

}  // namespace slurm_train
