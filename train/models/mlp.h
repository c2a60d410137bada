// A multi-layer perceptron: Linear -> activation (-> dropout) for each hidden layer, then a
// Linear to the class logits. Parameters live in one contiguous buffer and gradients in
// another, layer by layer in forward order (weight [out, in] row-major, then bias [out]), so
// that gradient buckets are contiguous ranges and a checkpoint is one copy.
// Templated on the element type: float for training, double for the gradient checks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "train/io/host_vector.h"

namespace slurm_train {

struct MlpShape {
  int inputs = 784;
  std::vector<int> hidden = {256};
  int classes = 10;
  kernels::Activation activation = kernels::Activation::kRelu;
  float dropout = 0.0f;  // after each hidden activation; 0 disables
};

struct LayerLayout {
  int in = 0, out = 0;
  std::size_t weight = 0, bias = 0;  // offsets into the parameter buffer
  std::size_t begin() const { return weight; }
  std::size_t end() const { return bias + static_cast<std::size_t>(out); }
};

std::vector<LayerLayout> mlp_layout(const MlpShape& shape);

// He (Kaiming) normal weights for ReLU-family activations and zero biases into `params` (laid out
// as `layers` says): what Mlp::initialize(seed) gives, and what a resume that finds no usable
// checkpoint puts back (checkpoint_resume.h).
template <typename T>
void initialize_parameters(const std::vector<LayerLayout>& layers, std::uint64_t seed, HostVector<T>& params);

template <typename T>
class Mlp {
 public:
  Mlp(MlpShape shape, kernels::Kernels<T>& k);

  const MlpShape& shape() const { return shape_; }
  const std::vector<LayerLayout>& layers() const { return layers_; }
  HostVector<T>& params() { return params_; }
  std::vector<T>& grads() { return grads_; }
  // "layer1.weight", "layer3.bias": the names checkpoints and tools show.
  static std::string parameter_name(std::size_t layer, bool weight);

  // He (Kaiming) normal initialisation of the weights for ReLU-family activations, zero biases;
  // depends only on the seed.
  void initialize(std::uint64_t seed);

  // Logits [rows, classes] for x [rows, inputs]. With `training`, dropout is applied (keyed by
  // dropout_seed and the global row index of x's first row) and activations are kept for
  // backward(); the returned pointer stays valid until the next forward().
  const T* forward(const T* x, int rows, bool training, std::uint64_t dropout_seed = 0, std::uint64_t first_row = 0);

  // Gradients of the parameters (overwritten) from dlogits, for the x of the last forward().
  // After each layer's gradients are complete, layer_done(layer) is called, last layer first,
  // so that a caller can start reducing them while the rest of backward runs.
  void backward(const T* x, const T* dlogits, const std::function<void(std::size_t)>& layer_done = {});

 private:
  // The dropout after layer `layer` in the current step (none after the last layer).
  kernels::DropoutParams dropout_of(std::size_t layer) const;

  MlpShape shape_;
  kernels::Kernels<T>& k_;
  std::vector<LayerLayout> layers_;
  HostVector<T> params_;
  std::vector<T> grads_;
  // Per layer: pre-activations z and outputs a (a == z for the last layer); sized for the
  // largest batch seen.
  std::vector<std::vector<T>> z_, a_;
  std::vector<T> grad_a_, grad_z_;
  int rows_ = 0;
  bool dropout_active_ = false;
  std::uint64_t dropout_seed_ = 0, first_row_ = 0;
};

}  // namespace slurm_train
