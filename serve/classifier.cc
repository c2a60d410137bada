#include "serve/classifier.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace slurm_train {

namespace {

kernels::Activation activation_of(const std::string& name) {
  if (name == "relu") return kernels::Activation::kRelu;
  if (name == "gelu") return kernels::Activation::kGelu;
  if (name == "identity") return kernels::Activation::kIdentity;
  throw std::invalid_argument(fmt::format("activation '{}'; expected relu, gelu or identity", name));
}

}  // namespace

Classifier::Classifier(const ModelLayout& model, std::span<const float> params, const ModelRecipe& recipe,
                       int threads) {
  if (model.kind != "mlp" || model.layers.empty())
    throw std::invalid_argument(fmt::format("a {} model is not a classifier (an mlp)", model.kind));
  if (params.size() != model.parameters())
    throw std::invalid_argument(
        fmt::format("{} parameters; the model's layers take {}", params.size(), model.parameters()));
  MlpShape shape;
  shape.inputs = model.layers.front().in;
  shape.hidden.clear();
  for (std::size_t l = 0; l + 1 < model.layers.size(); ++l) shape.hidden.push_back(model.layers[l].out);
  shape.classes = model.layers.back().out;
  shape.activation = activation_of(recipe.activation);
  inputs_ = shape.inputs;
  classes_ = shape.classes;
  // The factors are float32 values (model_file.h): the same products as the engine's and PyTorch's.
  input_scale_ = static_cast<float>(recipe.input_scale);
  mean_ = static_cast<float>(recipe.mean);
  inv_stddev_ = static_cast<float>(recipe.inv_stddev);
  openblas_set_num_threads(std::max(1, threads));
  kernels_ = kernels::make_cpu_kernels(std::max(1, threads));
  mlp_ = std::make_unique<Mlp<float>>(shape, *kernels_);
  std::copy(params.begin(), params.end(), mlp_->params().begin());
}

Classifier::~Classifier() = default;

void Classifier::predict(const float* raw, int rows, int* classes, float* probabilities) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(inputs_);
  x_.resize(n);
  for (std::size_t i = 0; i < n; ++i) x_[i] = (raw[i] * input_scale_ - mean_) * inv_stddev_;
  const float* logits = mlp_->forward(x_.data(), rows, /*training=*/false);
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * classes_;
    float* p = probabilities + static_cast<std::size_t>(r) * classes_;
    int best = 0;
    for (int c = 1; c < classes_; ++c)
      if (l[c] > l[best]) best = c;
    classes[r] = best;
    float sum = 0;
    for (int c = 0; c < classes_; ++c) sum += p[c] = std::exp(l[c] - l[best]);
    for (int c = 0; c < classes_; ++c) p[c] /= sum;
  }
}

}  // namespace slurm_train
