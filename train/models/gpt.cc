#include "train/models/gpt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/attention_gemm.h"
#include "kernels/cpu/column_sums.h"
#include "kernels/cpu/layernorm_rows.h"
#include "kernels/cpu/transformer_ops.h"
#include "kernels/elementwise.h"

namespace slurm_train {

namespace {

// The tensors of one block, in layout order after wte and wpe.
enum Block : std::size_t {
  kLn1W,
  kLn1B,
  kAttnW,
  kAttnB,
  kAttnProjW,
  kAttnProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kMlpProjW,
  kMlpProjB,
  kBlockTensors
};
constexpr std::size_t kWte = 0, kWpe = 1;

std::size_t block_tensor(int layer, Block b) { return 2 + static_cast<std::size_t>(layer) * kBlockTensors + b; }

// A standard normal draw from (seed, index) alone (Box-Muller on two counter-based uniforms).
double normal_from_counter(std::uint64_t seed, std::uint64_t index) {
  const auto uniform = [&](std::uint64_t stream) {
    return (static_cast<double>(kernels::mix64(seed ^ kernels::mix64(index * 2 + stream)) >> 11) + 0.5) * 0x1.0p-53;
  };
  return std::sqrt(-2.0 * std::log(uniform(0))) * std::cos(6.283185307179586 * uniform(1));
}

}  // namespace

std::vector<ParamTensor> gpt_layout(const GptConfig& g) {
  if (g.vocab < 1 || g.block < 1 || g.layers < 1 || g.heads < 1 || g.embd < 1 || g.embd % g.heads != 0)
    throw std::invalid_argument(
        fmt::format("gpt: vocab {}, block {}, layers {}, heads {}, embd {}: expected positive "
                    "sizes and embd a multiple of heads",
                    g.vocab, g.block, g.layers, g.heads, g.embd));
  const std::int64_t C = g.embd;
  std::vector<ParamTensor> out;
  std::size_t offset = 0;
  const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
    std::size_t size = 1;
    for (const auto d : shape) size *= static_cast<std::size_t>(d);
    out.push_back({std::move(name), std::move(shape), offset, size});
    offset += size;
  };
  add("wte", {g.vocab, C});
  add("wpe", {g.block, C});
  for (int l = 0; l < g.layers; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {C, 3 * C});
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {C, 4 * C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {4 * C, C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
  return out;
}

std::vector<LayerLayout> gpt_decay_layout(const std::vector<ParamTensor>& layout) {
  std::vector<LayerLayout> out;
  for (const auto& t : layout) {
    LayerLayout l;
    l.weight = t.offset;
    if (t.shape.size() >= 2) {
      l.bias = t.offset + t.size;  // all of it decays
      l.out = 0;
    } else {
      l.bias = t.offset;  // none of it does
      l.out = static_cast<int>(t.size);
    }
    out.push_back(l);
  }
  return out;
}

void gpt_initialize(const GptConfig& config, std::uint64_t seed, HostVector<float>& params) {
  const auto layout = gpt_layout(config);
  params.assign(layout.back().offset + layout.back().size, 0.0f);
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const ParamTensor& t = layout[i];
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_ln_weight = t.name.find("ln_") != std::string::npos && t.name.ends_with(".weight");
    if (is_bias) continue;
    if (is_ln_weight) {
      std::fill_n(params.begin() + static_cast<std::ptrdiff_t>(t.offset), t.size, 1.0f);
      continue;
    }
    const double std = t.name.ends_with("c_proj.weight") ? residual_std : 0.02;
    for (std::size_t j = 0; j < t.size; ++j)
      params[t.offset + j] = static_cast<float>(std * normal_from_counter(seed + i, j));
  }
}

Gpt::Gpt(const GptConfig& config, kernels::Kernels<float>& k) : config_(config), k_(k), layout_(gpt_layout(config)) {
  params_.assign(layout_.back().offset + layout_.back().size, 0.0f);
  grads_.assign(params_.size(), 0.0f);
}

void Gpt::resize(int B, int T) {
  if (B < 1 || T < 1 || T > config_.block)
    throw std::invalid_argument(
        fmt::format("gpt: a batch of {} sequences of {} tokens: expected at least one of at "
                    "least one token and at most the block size {}",
                    B, T, config_.block));
  B_ = B;
  T_ = T;
  const std::size_t BT = static_cast<std::size_t>(B) * T, C = static_cast<std::size_t>(config_.embd),
                    L = static_cast<std::size_t>(config_.layers), H = static_cast<std::size_t>(config_.heads),
                    V = static_cast<std::size_t>(config_.vocab);
  // Buffers only grow: an evaluation slice between two steps must not cost the next step a fresh
  // allocation (a page fault per 4 KiB and a clearing pass).
  const auto at_least = [](std::vector<float>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
  };
  at_least(residual_, (L + 1) * BT * C);
  for (auto* v : {&ln1_, &atty_, &residual2_, &ln2_}) at_least(*v, L * BT * C);
  for (auto* v : {&ln1_mean_, &ln1_rstd_, &ln2_mean_, &ln2_rstd_}) at_least(*v, L * BT);
  at_least(qkv_, L * BT * 3 * C);
  at_least(probs_, L * B * H * T * T);
  at_least(fc_, L * BT * 4 * C);
  at_least(fch_, L * BT * 4 * C);
  at_least(lnf_, BT * C);
  at_least(lnf_mean_, BT);
  at_least(lnf_rstd_, BT);
  at_least(logits_, BT * V);
  at_least(dlogits_, BT * V);
  for (auto* v : {&projected_, &dres_, &dbranch_, &dln_, &datty_}) at_least(*v, BT * C);
  if (dropout_.p > 0.0f) at_least(dropped_, BT * C);  // forward_sums sets dropout_ first
  at_least(dwide_, BT * 4 * C);
  at_least(dqkv_, BT * 3 * C);
}

double Gpt::forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T) {
  const int BT = B * T;
  return forward_sums(tokens, targets, B, T, 1.0f / static_cast<float>(BT)).loss_sum / BT;
}

kernels::DropoutParams Gpt::dropout_at(std::size_t site) const {
  if (dropout_.p <= 0.0f) return {};
  return {dropout_.p, kernels::mix64(dropout_.seed + 0x9e37 * (site + 1)),
          dropout_.first_window * static_cast<std::uint64_t>(T_)};
}

const float* Gpt::through_dropout(std::size_t site, int rows, int cols, const float* d, float* out, float* dbias) {
  if (dropout_.p <= 0.0f) {
    kernels::add_column_sums(rows, cols, d, dbias);
    return d;
  }
  // Identity's derivative does not read z: d stands in for it.
  k_.activation_backward(kernels::Activation::kIdentity, rows, cols, d, d, out, dbias, dropout_at(site));
  return out;
}

kernels::LossResult Gpt::forward_sums(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                                      float loss_scale, const GptDropout& dropout) {
  if (!(dropout.p >= 0.0f && dropout.p < 1.0f))
    throw std::invalid_argument(fmt::format("gpt: dropout {}: expected a probability in [0, 1)", dropout.p));
  dropout_ = dropout;
  resize(B, T);
  const int C = config_.embd, V = config_.vocab, H = config_.heads, BT = B * T;
  for (int i = 0; i < BT; ++i)
    if (tokens[i] < 0 || tokens[i] >= V || targets[i] < 0 || targets[i] >= V)
      throw std::invalid_argument(
          fmt::format("gpt: token or target {} at position {} is outside the vocabulary [0, {})",
                      tokens[i] < 0 || tokens[i] >= V ? tokens[i] : targets[i], i, V));
  tokens_.assign(tokens, tokens + BT);
  targets_.assign(targets, targets + BT);
  const std::size_t bt = static_cast<std::size_t>(BT);
  float* const projected = projected_.data();
  // The embeddings' sum is dropout site 0; block l's attention branch 1 + 2l, its MLP 2 + 2l.
  if (dropout.p > 0.0f) {
    kernels::embedding_forward(B, T, C, tokens, param(kWte), param(kWpe), projected);
    zeros_.assign(static_cast<std::size_t>(C), 0.0f);
    k_.bias_activation_forward(kernels::Activation::kIdentity, BT, C, zeros_.data(), projected, residual_.data(),
                               dropout_at(0));
  } else {
    kernels::embedding_forward(B, T, C, tokens, param(kWte), param(kWpe), residual_.data());
  }
  // A branch's projection joins the residual stream: to = from + dropout(x W + bias), x of width k.
  // Without dropout the product accumulates straight into `to`, filled with from + bias first: one
  // pass over the rows where a product into scratch, its bias and the sum would take three.
  const auto add_branch = [&](std::size_t site, const float* x, int k, std::size_t w, std::size_t bias,
                              const float* from, float* to) {
    if (dropout.p > 0.0f) {
      k_.gemm(false, false, BT, C, k, 1.0f, x, k, param(w), C, 0.0f, projected, C);
      k_.bias_activation_forward(kernels::Activation::kIdentity, BT, C, param(bias), projected, dropped_.data(),
                                 dropout_at(site));
      kernels::residual_forward(static_cast<std::int64_t>(bt) * C, from, dropped_.data(), to);
      return;
    }
    kernels::residual_bias_forward(BT, C, from, param(bias), to);
    k_.gemm(false, false, BT, C, k, 1.0f, x, k, param(w), C, 1.0f, to, C);
  };
  for (int l = 0; l < config_.layers; ++l) {
    const std::size_t L = static_cast<std::size_t>(l);
    float* r = residual_.data() + L * bt * C;
    float* ln1 = ln1_.data() + L * bt * C;
    float* qkv = qkv_.data() + L * bt * 3 * C;
    float* atty = atty_.data() + L * bt * C;
    float* r2 = residual2_.data() + L * bt * C;
    float* ln2 = ln2_.data() + L * bt * C;
    float* fc = fc_.data() + L * bt * 4 * C;
    float* fch = fch_.data() + L * bt * 4 * C;
    kernels::layernorm_rows_forward(BT, C, r, param(block_tensor(l, kLn1W)), param(block_tensor(l, kLn1B)), ln1,
                                    ln1_mean_.data() + L * bt, ln1_rstd_.data() + L * bt);
    // The product adds to its bias: a pass that fills the rows, where clearing them and adding the
    // bias after would take two.
    const float* attn_bias = param(block_tensor(l, kAttnB));
    for (std::size_t row = 0; row < bt; ++row) std::copy_n(attn_bias, 3 * C, qkv + row * 3 * C);
    k_.gemm(false, false, BT, 3 * C, C, 1.0f, ln1, C, param(block_tensor(l, kAttnW)), 3 * C, 1.0f, qkv, 3 * C);
    kernels::attention_forward_gemm(k_, B, T, C, H, qkv, atty,
                                    probs_.data() + L * static_cast<std::size_t>(B) * H * T * T);
    add_branch(1 + 2 * L, atty, C, block_tensor(l, kAttnProjW), block_tensor(l, kAttnProjB), r, r2);
    kernels::layernorm_rows_forward(BT, C, r2, param(block_tensor(l, kLn2W)), param(block_tensor(l, kLn2B)), ln2,
                                    ln2_mean_.data() + L * bt, ln2_rstd_.data() + L * bt);
    k_.gemm(false, false, BT, 4 * C, C, 1.0f, ln2, C, param(block_tensor(l, kFcW)), 4 * C, 0.0f, fc, 4 * C);
    k_.bias_gelu_forward(BT, 4 * C, param(block_tensor(l, kFcB)), fc, fch);  // fc: GELU's derivative
    add_branch(2 + 2 * L, fch, 4 * C, block_tensor(l, kMlpProjW), block_tensor(l, kMlpProjB), r2, r + bt * C);
  }
  const std::size_t ln_f = layout_.size() - 2;
  kernels::layernorm_rows_forward(BT, C, residual_.data() + static_cast<std::size_t>(config_.layers) * bt * C,
                                  param(ln_f), param(ln_f + 1), lnf_.data(), lnf_mean_.data(), lnf_rstd_.data());
  // The head is tied to the token embedding: logits = lnf wte^T.
  k_.gemm(false, true, BT, V, C, 1.0f, lnf_.data(), C, param(kWte), C, 0.0f, logits_.data(), V);
  return k_.softmax_cross_entropy(BT, V, logits_.data(), targets, 0.0f, loss_scale, dlogits_.data());
}

void Gpt::backward(const std::function<void(std::size_t tensor)>& tensor_done) {
  if (B_ == 0) throw std::logic_error("gpt: backward() before forward()");
  const int B = B_, T = T_, C = config_.embd, V = config_.vocab, H = config_.heads, BT = B * T;
  const std::size_t bt = static_cast<std::size_t>(BT);
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  std::vector<float>&dres = dres_, &dbranch = dbranch_, &dln = dln_, &dwide = dwide_, &dqkv = dqkv_, &datty = datty_;
  const std::size_t btc = bt * static_cast<std::size_t>(C);
  const std::size_t ln_f = layout_.size() - 2;
  // Through the tied head and the final LayerNorm (which adds into dres).
  std::fill_n(dres.begin(), btc, 0.0f);
  k_.gemm(false, false, BT, C, V, 1.0f, dlogits_.data(), V, param(kWte), C, 0.0f, dln.data(), C);
  k_.gemm(true, false, V, C, BT, 1.0f, dlogits_.data(), V, lnf_.data(), C, 1.0f, grad(kWte), C);
  kernels::layernorm_rows_backward(BT, C, residual_.data() + static_cast<std::size_t>(config_.layers) * bt * C,
                                   param(ln_f), lnf_mean_.data(), lnf_rstd_.data(), dln.data(), dres.data(), grad(ln_f),
                                   grad(ln_f + 1));
  const auto done = [&](std::size_t first, std::size_t last) {  // tensors [first, last], highest first
    if (tensor_done)
      for (std::size_t i = last + 1; i-- > first;) tensor_done(i);
  };
  done(ln_f, ln_f + 1);
  for (int l = config_.layers - 1; l >= 0; --l) {
    const std::size_t L = static_cast<std::size_t>(l);
    const float* r = residual_.data() + L * bt * C;
    const float* ln1 = ln1_.data() + L * bt * C;
    const float* qkv = qkv_.data() + L * bt * 3 * C;
    const float* atty = atty_.data() + L * bt * C;
    const float* r2 = residual2_.data() + L * bt * C;
    const float* ln2 = ln2_.data() + L * bt * C;
    const float* fc = fc_.data() + L * bt * 4 * C;
    const float* fch = fch_.data() + L * bt * 4 * C;
    // The MLP: out = r2 + c_proj(gelu(c_fc(ln_2(r2)))); dres is the gradient of out. It becomes
    // r2's, then r's, in place: each branch reads it (through its dropout, by its two products)
    // before that branch's LayerNorm adds into it.
    const float* dmlp =
        through_dropout(2 + 2 * L, BT, C, dres.data(), dbranch.data(), grad(block_tensor(l, kMlpProjB)));
    k_.gemm(true, false, 4 * C, C, BT, 1.0f, fch, 4 * C, dmlp, C, 1.0f, grad(block_tensor(l, kMlpProjW)), C);
    k_.gemm(false, true, BT, 4 * C, C, 1.0f, dmlp, C, param(block_tensor(l, kMlpProjW)), C, 0.0f, dwide.data(), 4 * C);
    k_.gelu_backward(BT, 4 * C, fc, dwide.data(), dwide.data(), grad(block_tensor(l, kFcB)));
    k_.gemm(true, false, C, 4 * C, BT, 1.0f, ln2, C, dwide.data(), 4 * C, 1.0f, grad(block_tensor(l, kFcW)), 4 * C);
    k_.gemm(false, true, BT, C, 4 * C, 1.0f, dwide.data(), 4 * C, param(block_tensor(l, kFcW)), 4 * C, 0.0f, dln.data(),
            C);
    kernels::layernorm_rows_backward(BT, C, r2, param(block_tensor(l, kLn2W)), ln2_mean_.data() + L * bt,
                                     ln2_rstd_.data() + L * bt, dln.data(), dres.data(), grad(block_tensor(l, kLn2W)),
                                     grad(block_tensor(l, kLn2B)));
    // Attention: r2 = r + c_proj(attention(c_attn(ln_1(r)))).
    const float* dattn =
        through_dropout(1 + 2 * L, BT, C, dres.data(), dbranch.data(), grad(block_tensor(l, kAttnProjB)));
    k_.gemm(true, false, C, C, BT, 1.0f, atty, C, dattn, C, 1.0f, grad(block_tensor(l, kAttnProjW)), C);
    k_.gemm(false, true, BT, C, C, 1.0f, dattn, C, param(block_tensor(l, kAttnProjW)), C, 0.0f, datty.data(), C);
    kernels::attention_backward_gemm(k_, B, T, C, H, qkv, probs_.data() + L * static_cast<std::size_t>(B) * H * T * T,
                                     datty.data(), dqkv.data(), attention_scratch_);
    k_.gemm(true, false, C, 3 * C, BT, 1.0f, ln1, C, dqkv.data(), 3 * C, 1.0f, grad(block_tensor(l, kAttnW)), 3 * C);
    kernels::add_column_sums(BT, 3 * C, dqkv.data(), grad(block_tensor(l, kAttnB)));
    k_.gemm(false, true, BT, C, 3 * C, 1.0f, dqkv.data(), 3 * C, param(block_tensor(l, kAttnW)), 3 * C, 0.0f,
            dln.data(), C);
    kernels::layernorm_rows_backward(BT, C, r, param(block_tensor(l, kLn1W)), ln1_mean_.data() + L * bt,
                                     ln1_rstd_.data() + L * bt, dln.data(), dres.data(), grad(block_tensor(l, kLn1W)),
                                     grad(block_tensor(l, kLn1B)));
    done(block_tensor(l, kLn1W), block_tensor(l, kMlpProjB));
  }
  if (dropout_.p > 0.0f) {
    std::vector<float> unused(static_cast<std::size_t>(C));
    k_.activation_backward(kernels::Activation::kIdentity, BT, C, dres.data(), dres.data(), dres.data(), unused.data(),
                           dropout_at(0));
  }
  kernels::embedding_backward(B, T, C, tokens_.data(), dres.data(), grad(kWte), grad(kWpe));
  done(kWte, kWpe);
}

}  // namespace slurm_train
