#include "train/models/model_layout.h"

#include <fmt/format.h>

namespace slurm_train {

ModelLayout mlp_model_layout(const std::vector<LayerLayout>& layers) {
  ModelLayout m;
  m.kind = "mlp";
  m.layers = layers;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerLayout& L = layers[l];
    m.tensors.push_back({Mlp<float>::parameter_name(l, true),
                         {L.out, L.in},
                         L.weight,
                         static_cast<std::size_t>(L.out) * static_cast<std::size_t>(L.in)});
    m.tensors.push_back({Mlp<float>::parameter_name(l, false), {L.out}, L.bias, static_cast<std::size_t>(L.out)});
  }
  return m;
}

ModelLayout gpt_model_layout(const GptConfig& config) {
  ModelLayout m;
  m.kind = "gpt";
  m.gpt = config;
  m.tensors = gpt_layout(config);
  m.layers = gpt_decay_layout(m.tensors);
  return m;
}

namespace {

// "[4x6, 3x4]": an MLP's layers as out x in.
std::string layer_shapes(const std::vector<LayerLayout>& layers) {
  std::string s;
  for (const auto& L : layers) s += fmt::format("{}{}x{}", s.empty() ? "" : ", ", L.out, L.in);
  return "[" + s + "]";
}

std::string describe(const ModelLayout& m) {
  if (m.kind == "gpt")
    return fmt::format("a gpt of vocab {}, block {}, {} layers, {} heads, embd {}", m.gpt.vocab, m.gpt.block,
                       m.gpt.layers, m.gpt.heads, m.gpt.embd);
  return "an mlp of layers (out x in) " + layer_shapes(m.layers);
}

}  // namespace

std::string model_layout_mismatch(const ModelLayout& file, const ModelLayout& run) {
  if (file.kind == "mlp" && run.kind == "mlp") {
    bool same = file.layers.size() == run.layers.size();
    for (std::size_t i = 0; same && i < file.layers.size(); ++i)
      same = file.layers[i].in == run.layers[i].in && file.layers[i].out == run.layers[i].out;
    if (same) return "";
    return fmt::format("its layers (out x in) are {} but this run's model has {}", layer_shapes(file.layers),
                       layer_shapes(run.layers));
  }
  bool same = file.kind == run.kind && file.tensors.size() == run.tensors.size();
  for (std::size_t i = 0; same && i < file.tensors.size(); ++i)
    same = file.tensors[i].name == run.tensors[i].name && file.tensors[i].shape == run.tensors[i].shape;
  if (same) return "";
  return fmt::format("it holds {} but this run's model is {}", describe(file), describe(run));
}

void initialize_model_parameters(const ModelLayout& model, std::uint64_t seed, HostVector<float>& params) {
  if (model.kind == "gpt") return gpt_initialize(model.gpt, seed, params);
  initialize_parameters(model.layers, seed, params);
}

}  // namespace slurm_train
