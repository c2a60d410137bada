// A classifier (the MLP of a model file or checkpoint) answering /predict: the raw features of
// each row go through the file's own normalisation, x = (raw * input_scale - mean) * inv_stddev
// in float32 (model_file.h), then the model, then a softmax. The same arithmetic as
// examples/load_in_pytorch.py: the same classes, probabilities within float rounding.
// Not thread-safe: one caller at a time (the batcher's thread).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels/kernels.h"
#include "train/models/mlp.h"
#include "train/models/model_file.h"
#include "train/models/model_layout.h"

namespace slurm_train {

class Classifier {
 public:
  // Throws std::invalid_argument for a model that is not an MLP, parameters of another count, or
  // an activation other than relu, gelu or identity. `threads`: the matrix products' (OpenBLAS).
  Classifier(const ModelLayout& model, std::span<const float> params, const ModelRecipe& recipe, int threads);
  ~Classifier();

  int inputs() const { return inputs_; }
  int classes() const { return classes_; }

  // For raw [rows, inputs]: the most likely class of each row (the first of equals, as
  // torch.argmax) into classes[rows] and the softmax into probabilities[rows, classes].
  void predict(const float* raw, int rows, int* classes, float* probabilities);

 private:
  int inputs_ = 0, classes_ = 0;
  float input_scale_ = 1, mean_ = 0, inv_stddev_ = 1;
  std::unique_ptr<kernels::Kernels<float>> kernels_;
  std::unique_ptr<Mlp<float>> mlp_;
  std::vector<float> x_;
};

}  // namespace slurm_train
