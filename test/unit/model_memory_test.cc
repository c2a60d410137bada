#include "train/models/model_memory.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("model memory: parameters counted without overflow") {
  CHECK(mlp_parameter_count(784, {}, 10) == 7850u);
  CHECK(mlp_parameter_count(784, {64, 32}, 10) == 784u * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10);
  CHECK(mlp_parameter_count(784, {65536, 65536}, 10) ==
        784ull * 65536 + 65536 + 65536ull * 65536 + 65536 + 65536 * 10 + 10);
  CHECK_FALSE(mlp_parameter_count(1ull << 62, {65536}, 10).has_value());
}

TEST_CASE("model memory: weights, gradients and moments, plus activations") {
  RunConfig c;
  c.model.hidden = {};
  c.data.num_classes = 10;
  c.train.global_batch = 100;
  c.train.eval_batch = 10;
  const ModelMemory adamw = model_training_memory(c, 790, 1);
  CHECK(adamw.parameters == 7910);
  // 4 copies of the parameters; 101 rows (a rank's batch, rounded up) x (790 + 10) x z and a.
  CHECK(adamw.bytes == 7910u * 4 * 4 + 101u * 800 * 2 * 4);
  c.train.optimizer = "sgd";
  c.ckpt.dir = "ck";  // asynchronous by default: a snapshot of weights and momentum
  CHECK(model_training_memory(c, 790, 4).bytes == 7910u * 4 * 5 + 26u * 800 * 2 * 4);
  c.model.hidden = {65536, 65536};
  const ModelMemory wide = model_training_memory(c, 784, 1);
  CHECK(*wide.bytes > 64ull << 30);
  CHECK(wide.why.find("4347133962 parameters x 5 float32 copies") == 0);
}
