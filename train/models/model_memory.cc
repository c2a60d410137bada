#include "train/models/model_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "train/io/memory_budget.h"

namespace slurm_train {

namespace {

constexpr std::uint64_t kMax = UINT64_MAX;

std::optional<std::uint64_t> add(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  if (!a || !b || *a > kMax - *b) return std::nullopt;
  return *a + *b;
}

std::optional<std::uint64_t> mul(std::optional<std::uint64_t> a, std::uint64_t b) {
  if (!a) return std::nullopt;
  return checked_bytes({*a}, b);
}

}  // namespace

std::optional<std::uint64_t> mlp_parameter_count(std::uint64_t inputs, const std::vector<int>& hidden, int classes) {
  std::optional<std::uint64_t> count = 0;
  std::uint64_t in = inputs;
  std::vector<int> outs = hidden;
  outs.push_back(classes);
  for (int w : outs) {
    const auto out = static_cast<std::uint64_t>(std::max(w, 0));
    count = add(count, add(mul(in, out), out));  // weights and biases
    in = out;
  }
  return count;
}

std::optional<std::uint64_t> gpt_parameter_count(std::uint64_t vocab, const ModelConfig& m) {
  const auto C = static_cast<std::uint64_t>(std::max(m.embd, 0));
  const auto per_layer =
      add(mul(C, 12 * C), 13 * C);  // c_attn 3C^2+3C, c_proj C^2+C, c_fc 4C^2+4C, its proj 4C^2+C, two LayerNorms 4C
  return add(add(mul(add(vocab, static_cast<std::uint64_t>(std::max(m.block, 0))), C),
                 mul(per_layer, static_cast<std::uint64_t>(std::max(m.layers, 0)))),
             2 * C);
}

ModelMemory model_training_memory(const RunConfig& c, std::uint64_t inputs, std::uint64_t ranks) {
  ModelMemory m;
  const bool gpt = c.model.kind == "gpt";
  const auto params =
      gpt ? gpt_parameter_count(inputs, c.model) : mlp_parameter_count(inputs, c.model.hidden, c.data.num_classes);
  m.parameters = params.value_or(kMax);
  const std::uint64_t moments = c.train.optimizer == "adamw" ? 2 : 1;
  const std::uint64_t snapshot = !c.ckpt.dir.empty() && c.ckpt.async ? 1 + moments : 0;
  const std::uint64_t copies = 2 + moments + snapshot;
  const std::uint64_t per_rank =
      static_cast<std::uint64_t>(std::max<std::int64_t>(c.train.global_batch, 1)) / std::max<std::uint64_t>(ranks, 1) +
      1;
  const std::uint64_t rows =
      std::max(per_rank, static_cast<std::uint64_t>(std::max<std::int64_t>(c.train.eval_batch, 1)));
  std::optional<std::uint64_t> activations;
  if (gpt) {
    // Per token and layer the forward pass keeps 16 C floats (residuals, LayerNorms, qkv, the
    // attention's output, the MLP's two 4C), on a GPU in bf16 the 8 C of them the products read
    // again (4 C floats' bytes), and H x T attention probabilities; then the logits and their
    // gradient. Evaluation runs the training rows' count at a time.
    const auto C = static_cast<std::uint64_t>(std::max(c.model.embd, 0));
    const auto T = static_cast<std::uint64_t>(std::max(c.model.block, 0));
    const auto H = static_cast<std::uint64_t>(std::max(c.model.heads, 0));
    const auto tokens = mul(per_rank, T);
    const auto per_token = add(mul(add(20 * C, mul(H, T)), static_cast<std::uint64_t>(std::max(c.model.layers, 0))),
                               add(2 * inputs, 2 * C));
    activations = mul(mul(per_token, tokens.value_or(kMax)), sizeof(float));
  } else {
    std::optional<std::uint64_t> widths = inputs;
    for (int w : c.model.hidden) widths = add(widths, static_cast<std::uint64_t>(std::max(w, 0)));
    widths = add(widths, static_cast<std::uint64_t>(std::max(c.data.num_classes, 0)));
    // Each layer keeps its pre-activations and outputs for the batch.
    activations = mul(mul(widths, rows), 2 * sizeof(float));
  }
  m.bytes = add(mul(params, copies * sizeof(float)), activations);
  m.why = fmt::format(
      "{} parameters x {} float32 copies (weights, gradients, {} optimizer moment(s){}), plus {} "
      "for the activations of {} rows",
      params ? fmt::format("{}", *params) : "more than 2^64", copies, moments,
      snapshot ? ", the asynchronous checkpoint's snapshot" : "",
      activations ? format_bytes(*activations) : "more than 16 EiB", gpt ? per_rank : rows);
  return m;
}

}  // namespace slurm_train
