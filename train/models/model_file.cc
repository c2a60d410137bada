#include "train/models/model_file.h"

#include <fmt/format.h>

#include <filesystem>

#include "train/io/crc32.h"
#include "train/io/durable_file.h"
#include "train/io/h5.h"
#include "train/io/tensor_io.h"

#ifndef SLURM_TRAIN_VERSION
#error "SLURM_TRAIN_VERSION must be defined by the build"
#endif

namespace slurm_train {

namespace {

constexpr const char* kFormula =
    "x = (raw * input_scale - mean) * inv_stddev, raw being each stored feature (a uint8 pixel or a float) of the "
    "sample flattened in C order; then layerN: x = x @ weight.T + bias, the activation after each but the last";

}  // namespace

ModelRecipe model_recipe_of(Normalization norm, bool uint8_features, const std::string& activation) {
  // The factors as the engine applies them (Dataset::raw, LabelledSamples::gather): float32 values.
  return {activation, uint8_features ? static_cast<double>(1.0f / 255.0f) : 1.0, norm.mean, norm.inv_stddev};
}

void write_model_recipe(hid_t file, const ModelLayout& m, const ModelRecipe& recipe, const std::string& context) {
  h5::Handle model(H5_CHECK(H5Gopen2(file, "/model", H5P_DEFAULT), context + ":/model"));
  h5::write_string_attribute(model, "kind", m.kind, context);
  if (m.kind == "gpt") {
    const GptConfig& g = m.gpt;
    h5::write_int64_attribute(model, "vocab_size", g.vocab, context);
    h5::write_int64_attribute(model, "n_positions", g.block, context);
    h5::write_int64_attribute(model, "n_layer", g.layers, context);
    h5::write_int64_attribute(model, "n_head", g.heads, context);
    h5::write_int64_attribute(model, "n_embd", g.embd, context);
    h5::write_string_attribute(model, "activation", "gelu", context);
    h5::write_string_attribute(model, "tokenizer", "bytes", context);
    return;
  }
  std::vector<std::int64_t> widths;
  if (!m.layers.empty()) widths.push_back(m.layers.front().in);
  for (const LayerLayout& L : m.layers) widths.push_back(L.out);
  h5::write_int64_list_attribute(model, "widths", widths, context);
  h5::write_string_attribute(model, "activation", recipe.activation, context);
  h5::Handle pre(H5_CHECK(H5Gcreate2(file, "/preprocessing", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), context));
  h5::write_double_attribute(pre, "input_scale", recipe.input_scale, context);
  h5::write_double_attribute(pre, "mean", recipe.mean, context);
  h5::write_double_attribute(pre, "inv_stddev", recipe.inv_stddev, context);
  h5::write_string_attribute(pre, "formula", kFormula, context);
}

void save_model(const std::string& path, const ModelLayout& model, std::span<const float> params,
                const std::string& config_toml, const ModelRecipe& recipe) {
  write_file_durably(path, [&](const FilePath& temporary) {
    const std::string& tmp = temporary.shown;  // for messages
    h5::Handle file = h5::create_file(temporary, kDirectIoFrom);
    h5::Handle group(H5_CHECK(H5Gcreate2(file, "/model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), tmp));
    for (const ParamTensor& t : model.tensors) {
      const std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
      h5::write_float32(group, t.name, shape, &params[t.offset], tmp);
      // The checkpoints' checksum (checkpoint_file.h), so that a reader finds a damaged model file.
      h5::Handle set(H5_CHECK(H5Dopen2(group, t.name.c_str(), H5P_DEFAULT), tmp + ":" + t.name));
      h5::Handle space(H5_CHECK(H5Screate(H5S_SCALAR), tmp));
      h5::Handle attr(
          H5_CHECK(H5Acreate2(set, "crc32", H5T_STD_U32LE, space, H5P_DEFAULT, H5P_DEFAULT), tmp + ":" + t.name));
      const std::uint32_t crc = crc32_update(0, &params[t.offset], t.size * sizeof(float));
      H5_CHECK(H5Awrite(attr, H5T_NATIVE_UINT32, &crc), tmp + ":" + t.name);
    }
    write_model_recipe(file, model, recipe, tmp);
    h5::Handle meta(H5_CHECK(H5Gcreate2(file, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), tmp));
    h5::write_string_attribute(meta, "program_version", SLURM_TRAIN_VERSION, tmp);
    h5::write_string_attribute(meta, "config", config_toml, tmp);
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp);
  });
}

}  // namespace slurm_train
