#include "train/models/mlp.h"

#include <cmath>
#include <stdexcept>

#include "train/io/huge_pages.h"

namespace slurm_train {

using kernels::Activation;

std::vector<LayerLayout> mlp_layout(const MlpShape& shape) {
  std::vector<LayerLayout> layers;
  std::size_t offset = 0;
  int in = shape.inputs;
  std::vector<int> outs = shape.hidden;
  outs.push_back(shape.classes);
  for (int out : outs) {
    if (in <= 0 || out <= 0) throw std::invalid_argument("model: every layer needs a positive width");
    LayerLayout l{in, out, offset, offset + static_cast<std::size_t>(in) * static_cast<std::size_t>(out)};
    offset = l.end();
    layers.push_back(l);
    in = out;
  }
  return layers;
}

template <typename T>
Mlp<T>::Mlp(MlpShape shape, kernels::Kernels<T>& k) : shape_(std::move(shape)), k_(k), layers_(mlp_layout(shape_)) {
  if (shape_.dropout < 0.0f || shape_.dropout >= 1.0f) throw std::invalid_argument("model: dropout must be in [0, 1)");
  // Fresh and faulted in as they are zeroed: in huge pages, 512x fewer faults (huge_pages.h).
  resize_in_huge_pages(params_, layers_.back().end());
  std::fill(params_.begin(), params_.end(), T(0));  // a model is zeros until initialised or read
  resize_in_huge_pages(grads_, params_.size());
  z_.resize(layers_.size());
  a_.resize(layers_.size());
}

template <typename T>
std::string Mlp<T>::parameter_name(std::size_t layer, bool weight) {
  return "layer" + std::to_string(layer + 1) + (weight ? ".weight" : ".bias");
}

template <typename T>
void initialize_parameters(const std::vector<LayerLayout>& layers, std::uint64_t seed, HostVector<T>& params) {
  for (const LayerLayout& L : layers) {
    const double stddev = std::sqrt(2.0 / L.in);
    const std::size_t n = static_cast<std::size_t>(L.in) * static_cast<std::size_t>(L.out);
    for (std::size_t i = 0; i < n; ++i) {
      // Box-Muller on two counter-based uniforms: the same weights on every platform.
      const double u1 = (kernels::mix64(seed ^ kernels::mix64(2 * (L.weight + i))) >> 11) * 0x1.0p-53;
      const double u2 = (kernels::mix64(seed ^ kernels::mix64(2 * (L.weight + i) + 1)) >> 11) * 0x1.0p-53;
      const double normal = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
      params[L.weight + i] = static_cast<T>(stddev * normal);
    }
    for (int j = 0; j < L.out; ++j) params[L.bias + static_cast<std::size_t>(j)] = T(0);
  }
}

template <typename T>
void Mlp<T>::initialize(std::uint64_t seed) {
  initialize_parameters(layers_, seed, params_);
}

template <typename T>
kernels::DropoutParams Mlp<T>::dropout_of(std::size_t layer) const {
  const bool last = layer + 1 == layers_.size();
  if (last || !dropout_active_) return {};
  return {shape_.dropout, kernels::mix64(dropout_seed_ + 0x9e37 * (layer + 1)), first_row_};
}

template <typename T>
const T* Mlp<T>::forward(const T* x, int rows, bool training, std::uint64_t dropout_seed, std::uint64_t first_row) {
  rows_ = rows;
  dropout_active_ = training && shape_.dropout > 0.0f;
  dropout_seed_ = dropout_seed;
  first_row_ = first_row;
  const T* input = x;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerLayout& L = layers_[l];
    const bool last = l + 1 == layers_.size();
    const std::size_t size = static_cast<std::size_t>(rows) * static_cast<std::size_t>(L.out);
    if (z_[l].size() < size) z_[l].resize(size);
    if (!last && a_[l].size() < size) a_[l].resize(size);
    T* z = z_[l].data();
    T* a = last ? z : a_[l].data();
    // z = input W^T, then bias, activation and dropout in one pass.
    k_.gemm(false, true, rows, L.out, L.in, T(1), input, L.in, &params_[L.weight], L.in, T(0), z, L.out);
    k_.bias_activation_forward(last ? Activation::kIdentity : shape_.activation, rows, L.out, &params_[L.bias], z, a,
                               dropout_of(l));
    input = a;
  }
  return z_.back().data();
}

template <typename T>
void Mlp<T>::backward(const T* x, const T* dlogits, const std::function<void(std::size_t)>& layer_done) {
  const int rows = rows_;
  std::size_t widest = 0;
  for (const auto& L : layers_) widest = std::max<std::size_t>(widest, static_cast<std::size_t>(std::max(L.in, L.out)));
  if (grad_a_.size() < rows * widest) grad_a_.resize(rows * widest);
  if (grad_z_.size() < rows * widest) grad_z_.resize(rows * widest);

  const T* grad_out = dlogits;  // gradient w.r.t. this layer's output a
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const LayerLayout& L = layers_[l];
    const bool last = l + 1 == layers_.size();
    T* grad_z = grad_z_.data();
    k_.activation_backward(last ? Activation::kIdentity : shape_.activation, rows, L.out, z_[l].data(), grad_out,
                           grad_z, &grads_[L.bias], dropout_of(l));
    const T* input = l == 0 ? x : a_[l - 1].data();
    // dW = dz^T input; d(input) = dz W.
    k_.gemm(true, false, L.out, L.in, rows, T(1), grad_z, L.out, input, L.in, T(0), &grads_[L.weight], L.in);
    if (l > 0) {
      k_.gemm(false, false, rows, L.in, L.out, T(1), grad_z, L.out, &params_[L.weight], L.in, T(0), grad_a_.data(),
              L.in);
      grad_out = grad_a_.data();
    }
    if (layer_done) layer_done(l);
  }
}

template class Mlp<float>;
template class Mlp<double>;
template void initialize_parameters<float>(const std::vector<LayerLayout>&, std::uint64_t, HostVector<float>&);
template void initialize_parameters<double>(const std::vector<LayerLayout>&, std::uint64_t, HostVector<double>&);

}  // namespace slurm_train
