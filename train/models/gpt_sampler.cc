#include "train/models/gpt_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "kernels/cpu/transformer_ops.h"
#include "kernels/elementwise.h"

namespace slurm_train {

namespace {

constexpr int kByteVocab = 256;

// y[out] = x[in] W[in, out] + b[out] (transformers' Conv1D). The loop runs over the rows of W,
// adding x[i] * W[i, :] to y: each y[j] is summed in the order of i whatever the compiler
// vectorises, and the inner loop walks W contiguously.
void conv1d(int in, int out, const float* x, const float* w, const float* b, float* y) {
  std::copy_n(b, out, y);
  for (int i = 0; i < in; ++i) {
    const float xi = x[i];
    const float* row = w + static_cast<std::int64_t>(i) * out;
    for (int j = 0; j < out; ++j) y[j] += xi * row[j];
  }
}

void layernorm(int C, const float* x, const float* weight, const float* bias, float* out) {
  float mean = 0, rstd = 0;
  kernels::layernorm_forward(1, C, x, weight, bias, out, &mean, &rstd);
}

// A uniform draw in [0, 1) from (seed, index) alone.
double uniform_from_counter(std::uint64_t seed, std::uint64_t index) {
  return static_cast<double>(kernels::mix64(seed ^ kernels::mix64(index)) >> 11) * 0x1.0p-53;
}

int argmax(const std::vector<float>& logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The token drawn from softmax(logits / temperature) over the top_k largest logits (all when
// top_k is 0), with the uniform draw of (seed, step). Ties in the top_k cut go to the lower
// token, and the weights are summed in token order: the draw depends on the logits alone.
int draw_token(const std::vector<float>& logits, const SampleOptions& options, std::uint64_t step) {
  if (options.temperature == 0) return argmax(logits);
  std::vector<int> candidates(logits.size());
  std::iota(candidates.begin(), candidates.end(), 0);
  if (options.top_k > 0 && static_cast<std::size_t>(options.top_k) < candidates.size()) {
    const auto more_likely = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(candidates.begin(), candidates.begin() + options.top_k, candidates.end(), more_likely);
    candidates.resize(static_cast<std::size_t>(options.top_k));
    std::sort(candidates.begin(), candidates.end());
  }
  float max = -std::numeric_limits<float>::infinity();
  for (const int c : candidates) max = std::max(max, logits[c]);
  std::vector<double> weights(candidates.size());
  double total = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(logits[candidates[i]]) - max) / options.temperature);
    total += weights[i];
  }
  const double target = uniform_from_counter(options.seed, step) * total;
  double sum = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    sum += weights[i];
    if (sum > target) return candidates[i];
  }
  return candidates.back();  // target within rounding of the total
}

}  // namespace

void check_sample_inputs(const GptConfig& config, const SampleOptions& options) {
  if (config.vocab != kByteVocab)
    throw std::invalid_argument(
        fmt::format("sample: vocab {}: expected {}, one token per byte", config.vocab, kByteVocab));
  if (options.tokens < 0)
    throw std::invalid_argument(fmt::format("sample: {} tokens: expected a count of at least 0", options.tokens));
  if (!std::isfinite(options.temperature) || options.temperature < 0)
    throw std::invalid_argument(
        fmt::format("sample: temperature {}: expected a finite number of at least 0 (0: greedy)", options.temperature));
  if (options.top_k < 0 || options.top_k > config.vocab)
    throw std::invalid_argument(fmt::format("sample: top_k {}: expected 0 (every token) up to the vocabulary size {}",
                                            options.top_k, config.vocab));
}

void GptDecoder::check_parameters(const GptConfig& config, std::size_t count) {
  const auto layout = gpt_layout(config);
  const std::size_t expected = layout.back().offset + layout.back().size;
  if (count != expected)
    throw std::invalid_argument(
        fmt::format("gpt sampler: {} parameters: expected {} for vocab {}, block {}, layers "
                    "{}, heads {}, embd {}",
                    count, expected, config.vocab, config.block, config.layers, config.heads, config.embd));
}

void GptDecoder::check_feed(const GptConfig& config, int position, int token) {
  if (token < 0 || token >= config.vocab)
    throw std::invalid_argument(
        fmt::format("gpt sampler: token {} is outside the vocabulary [0, {})", token, config.vocab));
  if (position >= config.block)
    throw std::logic_error(
        fmt::format("gpt sampler: the cache already holds the block size of {} tokens; reset() "
                    "and feed the window to keep",
                    config.block));
}

namespace {

std::shared_ptr<const HostVector<float>> copy_of(std::span<const float> params) {
  auto copy = std::make_shared<HostVector<float>>();
  copy->assign(params.begin(), params.end());
  return copy;
}

}  // namespace

GptSampler::GptSampler(const GptConfig& config, std::span<const float> params) : GptSampler(config, copy_of(params)) {}

GptSampler::GptSampler(const GptConfig& config, std::shared_ptr<const HostVector<float>> params)
    : config_(config), params_(std::move(params)) {
  const auto layout = gpt_layout(config);
  if (!params_) throw std::invalid_argument("gpt sampler: no parameters");
  check_parameters(config, params_->size());
  const auto tensor = [&](const std::string& name) -> const float* {
    for (const auto& t : layout)
      if (t.name == name) return params_->data() + t.offset;
    throw std::logic_error("gpt sampler: no tensor " + name + " in the layout");
  };
  wte_ = tensor("wte");
  wpe_ = tensor("wpe");
  lnf_w_ = tensor("ln_f.weight");
  lnf_b_ = tensor("ln_f.bias");
  for (int l = 0; l < config.layers; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    layers_.push_back({tensor(h + "ln_1.weight"), tensor(h + "ln_1.bias"), tensor(h + "attn.c_attn.weight"),
                       tensor(h + "attn.c_attn.bias"), tensor(h + "attn.c_proj.weight"), tensor(h + "attn.c_proj.bias"),
                       tensor(h + "ln_2.weight"), tensor(h + "ln_2.bias"), tensor(h + "mlp.c_fc.weight"),
                       tensor(h + "mlp.c_fc.bias"), tensor(h + "mlp.c_proj.weight"), tensor(h + "mlp.c_proj.bias")});
  }
  const std::size_t C = static_cast<std::size_t>(config.embd), V = static_cast<std::size_t>(config.vocab),
                    T = static_cast<std::size_t>(config.block), L = static_cast<std::size_t>(config.layers);
  wte_t_.resize(C * V);
  for (std::size_t v = 0; v < V; ++v)
    for (std::size_t c = 0; c < C; ++c) wte_t_[c * V + v] = wte_[v * C + c];
  keys_.resize(L * T * C);
  values_.resize(L * T * C);
  x_.resize(C);
  ln_.resize(C);
  qkv_.resize(3 * C);
  att_.resize(C);
  proj_.resize(C);
  fc_.resize(4 * C);
  scores_.resize(T);
  logits_.resize(V);
}

// att_ = causal attention of the query in qkv_ over the cached keys and values of positions
// 0..position_ (this one's already stored), head by head, with the softmax stabilised by each
// row's maximum.
void GptSampler::attend(int layer) {
  const int C = config_.embd, H = config_.heads, hs = C / H, T = config_.block, p = position_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* keys = keys_.data() + static_cast<std::size_t>(layer) * T * C;
  const float* values = values_.data() + static_cast<std::size_t>(layer) * T * C;
  for (int h = 0; h < H; ++h) {
    const float* q = qkv_.data() + h * hs;
    float max = -std::numeric_limits<float>::infinity();
    for (int t = 0; t <= p; ++t) {
      const float* k = keys + static_cast<std::size_t>(t) * C + h * hs;
      float s = 0;
      for (int i = 0; i < hs; ++i) s += q[i] * k[i];
      scores_[t] = s * scale;
      max = std::max(max, scores_[t]);
    }
    float sum = 0;
    for (int t = 0; t <= p; ++t) {
      scores_[t] = std::exp(scores_[t] - max);
      sum += scores_[t];
    }
    float* out = att_.data() + h * hs;
    std::fill_n(out, hs, 0.0f);
    for (int t = 0; t <= p; ++t) {
      const float weight = scores_[t] / sum;
      const float* v = values + static_cast<std::size_t>(t) * C + h * hs;
      for (int i = 0; i < hs; ++i) out[i] += weight * v[i];
    }
  }
}

const std::vector<float>& GptSampler::feed(int token) {
  const int C = config_.embd, V = config_.vocab;
  check_feed(config_, position_, token);
  const std::size_t c = static_cast<std::size_t>(C), p = static_cast<std::size_t>(position_);
  for (std::size_t i = 0; i < c; ++i) x_[i] = wte_[static_cast<std::size_t>(token) * c + i] + wpe_[p * c + i];
  for (int l = 0; l < config_.layers; ++l) {
    const LayerWeights& w = layers_[static_cast<std::size_t>(l)];
    const std::size_t cache = (static_cast<std::size_t>(l) * config_.block + p) * c;
    // x += c_proj(attention(c_attn(ln_1(x))))
    layernorm(C, x_.data(), w.ln1_w, w.ln1_b, ln_.data());
    conv1d(C, 3 * C, ln_.data(), w.attn_w, w.attn_b, qkv_.data());
    std::copy_n(qkv_.data() + c, c, keys_.data() + cache);
    std::copy_n(qkv_.data() + 2 * c, c, values_.data() + cache);
    attend(l);
    conv1d(C, C, att_.data(), w.attn_proj_w, w.attn_proj_b, proj_.data());
    for (std::size_t i = 0; i < c; ++i) x_[i] += proj_[i];
    // x += c_proj(gelu(c_fc(ln_2(x))))
    layernorm(C, x_.data(), w.ln2_w, w.ln2_b, ln_.data());
    conv1d(C, 4 * C, ln_.data(), w.fc_w, w.fc_b, fc_.data());
    for (float& f : fc_) f = kernels::gelu(f);
    conv1d(4 * C, C, fc_.data(), w.mlp_proj_w, w.mlp_proj_b, proj_.data());
    for (std::size_t i = 0; i < c; ++i) x_[i] += proj_[i];
  }
  layernorm(C, x_.data(), lnf_w_, lnf_b_, ln_.data());
  // The head is tied to the token embedding: logits = ln_f(x) wte^T.
  std::fill(logits_.begin(), logits_.end(), 0.0f);
  for (int i = 0; i < C; ++i) {
    const float xi = ln_[static_cast<std::size_t>(i)];
    const float* row = wte_t_.data() + static_cast<std::size_t>(i) * V;
    for (int v = 0; v < V; ++v) logits_[static_cast<std::size_t>(v)] += xi * row[v];
  }
  ++position_;
  return logits_;
}

std::string sample_text(const GptConfig& config, std::span<const float> params, std::string_view prompt,
                        const SampleOptions& options, const std::function<void(std::string_view)>& on_text) {
  check_sample_inputs(config, options);
  GptSampler sampler(config, params);
  return sample_text(sampler, prompt, options, on_text);
}

std::string sample_text(GptDecoder& sampler, std::string_view prompt, const SampleOptions& options,
                        const std::function<void(std::string_view)>& on_text) {
  const GptConfig& config = sampler.config();
  check_sample_inputs(config, options);
  sampler.reset();
  // The tokens in the cache, in order.
  std::vector<int> window;
  const std::size_t prompt_keep = static_cast<std::size_t>(std::max(1, config.block - 1));
  for (const char byte : prompt.substr(prompt.size() - std::min(prompt.size(), prompt_keep)))
    window.push_back(static_cast<unsigned char>(byte));
  if (window.empty()) window.push_back('\n');
  const std::vector<float>* logits = nullptr;
  for (const int token : window) logits = &sampler.feed(token);

  const std::size_t reprime_keep = static_cast<std::size_t>(std::max(1, config.block / 2));
  std::string text;
  text.reserve(static_cast<std::size_t>(options.tokens));
  for (int i = 0; i < options.tokens; ++i) {
    const int next = draw_token(*logits, options, static_cast<std::uint64_t>(i));
    text.push_back(static_cast<char>(next));
    if (on_text) on_text(std::string_view(&text.back(), 1));
    if (i + 1 == options.tokens) break;
    window.push_back(next);
    if (sampler.position() < config.block) {
      logits = &sampler.feed(next);
      continue;
    }
    // The cache is full: re-prime it with the last block / 2 tokens, the new one the last.
    window.erase(window.begin(), window.end() - static_cast<std::ptrdiff_t>(reprime_keep));
    sampler.reset();
    for (const int token : window) logits = &sampler.feed(token);
  }
  return text;
}

}  // namespace slurm_train
