// The model's gradients against central finite differences, in double precision, through the
// same Mlp code that trains (instantiated for double, on the reference kernels).
#include "train/models/mlp.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/reference_kernels.h"

using namespace slurm_train;
using kernels::Activation;

namespace {

struct Problem {
  MlpShape shape;
  int rows = 5;
  float smoothing = 0.1f;
  std::vector<double> x;
  std::vector<std::int32_t> y;
};

Problem make_problem(Activation act, float dropout) {
  Problem p;
  p.shape = MlpShape{7, {6, 5}, 4, act, dropout};
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  p.x.resize(static_cast<std::size_t>(p.rows) * 7);
  for (auto& v : p.x) v = normal(rng);
  for (int r = 0; r < p.rows; ++r) p.y.push_back(r % 4);
  return p;
}

// The training loss: label-smoothed cross-entropy averaged over the rows.
double loss_of(Mlp<double>& model, kernels::Kernels<double>& k, const Problem& p, std::vector<double>* dlogits) {
  const double* logits = model.forward(p.x.data(), p.rows, true, /*dropout_seed=*/99, /*first_row=*/40);
  std::vector<double> scratch(static_cast<std::size_t>(p.rows) * 4);
  auto r = k.softmax_cross_entropy(p.rows, 4, logits, p.y.data(), p.smoothing, 1.0 / p.rows,
                                   dlogits ? dlogits->data() : scratch.data());
  return r.loss_sum / p.rows;
}

void check_gradients(Activation act, float dropout) {
  kernels::ReferenceKernels<double> k;
  Problem p = make_problem(act, dropout);
  Mlp<double> model(p.shape, k);
  model.initialize(3);
  for (std::size_t i = 0; i < model.params().size(); ++i)
    model.params()[i] += 0.01 * std::sin(double(i));  // non-zero biases

  std::vector<double> dlogits(static_cast<std::size_t>(p.rows) * 4);
  loss_of(model, k, p, &dlogits);
  std::vector<std::size_t> done;
  model.backward(p.x.data(), dlogits.data(), [&](std::size_t layer) { done.push_back(layer); });
  CHECK(done == std::vector<std::size_t>{2, 1, 0});
  const std::vector<double> analytic = model.grads();

  const double h = 1e-6;
  double worst = 0;
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    const double saved = model.params()[i];
    model.params()[i] = saved + h;
    const double up = loss_of(model, k, p, nullptr);
    model.params()[i] = saved - h;
    const double down = loss_of(model, k, p, nullptr);
    model.params()[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double error = std::abs(numeric - analytic[i]) / std::max(1e-3, std::abs(numeric) + std::abs(analytic[i]));
    worst = std::max(worst, error);
  }
  CAPTURE(worst);
  CHECK(worst < 1e-6);
}

}  // namespace

TEST_CASE("mlp: gradients match finite differences (ReLU, no dropout)") { check_gradients(Activation::kRelu, 0.0f); }
TEST_CASE("mlp: gradients match finite differences (GELU, no dropout)") { check_gradients(Activation::kGelu, 0.0f); }
TEST_CASE("mlp: gradients match finite differences (ReLU, dropout 0.3)") { check_gradients(Activation::kRelu, 0.3f); }
TEST_CASE("mlp: gradients match finite differences (GELU, dropout 0.5)") { check_gradients(Activation::kGelu, 0.5f); }

TEST_CASE("mlp: parameters are laid out layer by layer, weight then bias") {
  const auto layers = mlp_layout(MlpShape{784, {256, 128}, 10});
  REQUIRE(layers.size() == 3);
  CHECK(layers[0].weight == 0);
  CHECK(layers[0].bias == 784u * 256u);
  CHECK(layers[1].weight == layers[0].end());
  CHECK(layers[2].end() == 784u * 256 + 256 + 256u * 128 + 128 + 128u * 10 + 10);
  CHECK(Mlp<float>::parameter_name(0, true) == "layer1.weight");
  CHECK(Mlp<float>::parameter_name(2, false) == "layer3.bias");
  CHECK_THROWS_AS(mlp_layout(MlpShape{784, {0}, 10}), std::invalid_argument);
}

TEST_CASE("mlp: initialisation depends only on the seed, with He scale") {
  kernels::ReferenceKernels<float> k;
  Mlp<float> a(MlpShape{512, {512}, 10}, k), b(MlpShape{512, {512}, 10}, k), c(MlpShape{512, {512}, 10}, k);
  a.initialize(1);
  b.initialize(1);
  c.initialize(2);
  CHECK(a.params() == b.params());
  CHECK(a.params() != c.params());
  const auto& L = a.layers()[0];
  double sum_sq = 0;
  for (std::size_t i = L.weight; i < L.bias; ++i) sum_sq += double(a.params()[i]) * a.params()[i];
  const double variance = sum_sq / double(L.bias - L.weight);
  CHECK(variance == doctest::Approx(2.0 / 512).epsilon(0.03));
  for (std::size_t i = L.bias; i < L.end(); ++i) CHECK(a.params()[i] == 0.0f);
}
