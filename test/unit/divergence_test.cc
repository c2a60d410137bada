// A diverged training is named: the step, the value, and what to try.
#include "train/loop/divergence.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace slurm_train;

TEST_CASE("divergence: a finite loss and gradient norm go on") {
  CHECK_FALSE(non_finite_step(3, 0.7, 1.5, 0.001, 0));
  CHECK_FALSE(non_finite_step(3, 1e30, 1e30, 0.001, 0));  // large, but a number
}

TEST_CASE("divergence: a NaN or infinite loss or gradient norm names the step, the value and what to try") {
  const auto nan_loss = non_finite_step(41, std::nan(""), 2.0, 0.05, 0);
  REQUIRE(nan_loss);
  CHECK(nan_loss->find("training diverged at step 41: the loss is nan (gradient norm 2)") != std::string::npos);
  CHECK(nan_loss->find("no checkpoint of it was written") != std::string::npos);
  CHECK(nan_loss->find("try a lower train.lr (now 0.05) or gradient clipping (train.clip_norm") != std::string::npos);
  const auto inf_norm = non_finite_step(2, 0.5, std::numeric_limits<double>::infinity(), 0.1, 5);
  REQUIRE(inf_norm);
  CHECK(inf_norm->find("at step 2: the gradient norm is inf (loss 0.5)") != std::string::npos);
  CHECK(inf_norm->find("or a lower train.clip_norm (now 5)") != std::string::npos);
  const auto inf_loss = non_finite_step(7, -std::numeric_limits<double>::infinity(), 3.0, 0.01, 0);
  REQUIRE(inf_loss);
  CHECK(inf_loss->find("training diverged at step 7: the loss is -inf (gradient norm 3)") != std::string::npos);
  const auto nan_norm = non_finite_step(9, 0.25, std::nan(""), 0.01, 0);
  REQUIRE(nan_norm);
  CHECK(nan_norm->find("at step 9: the gradient norm is nan (loss 0.25)") != std::string::npos);
}

TEST_CASE("divergence: the first non-finite parameter of a state about to be saved is named") {
  std::vector<float> params(10, 0.5f);
  CHECK_FALSE(non_finite_parameters(8, params));
  params[6] = -std::numeric_limits<float>::infinity();
  params[7] = std::nanf("");
  const auto message = non_finite_parameters(8, params);
  REQUIRE(message);
  CHECK(message->find("after step 8 parameter 6 of 10 is -inf") != std::string::npos);
}
