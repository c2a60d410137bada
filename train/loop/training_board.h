// The training as TensorBoard shows it (train.tensorboard; the file: tensorboard_writer.h): rank
// 0 writes each step's scalars (train/loss, train/accuracy, train/lr, train/grad_norm,
// train/samples_per_s, train/tokens_per_s, time/<phase>), each evaluation's (eval/loss,
// eval/accuracy) and rank 0's GPU reading (gpu/utilization_percent, gpu/power_watts), and every
// train.tensorboard_histograms steps a histogram of each parameter tensor (weights/<name>) and of
// its gradient before clipping (gradients/<name>). The step of a point is the steps done.
//
// Nothing here is collective, and a folder that cannot be written never ends the training: the
// first error is said on `out`, and nothing more is written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "train/loop/metrics.h"
#include "train/models/model_layout.h"
#include "train/steps/train_step.h"

namespace slurm_train {

class TensorboardWriter;

class TrainingBoard {
 public:
  // An empty `dir` (or a rank other than 0) writes nothing.
  TrainingBoard(const std::string& dir, std::int64_t histogram_every, bool rank0, std::ostream& out);
  ~TrainingBoard();
  TrainingBoard(const TrainingBoard&) = delete;
  TrainingBoard& operator=(const TrainingBoard&) = delete;

  // A run resumed at `steps_done`: the points an earlier run wrote for later steps (after the
  // checkpoint it was resumed from) are dropped by TensorBoard, so that no step shows twice.
  void resumed(std::uint64_t steps_done);
  // After finish_gradients() of the step that makes `steps_done`: keeps a copy of the gradients
  // when that step is due for histograms (nothing otherwise).
  void gradients(std::uint64_t steps_done, TrainStep& model);
  // After the update: the step's scalars, and when due the histograms (the parameters brought to
  // host memory for them).
  void step(const StepMetrics& m, TrainStep& model);
  void evaluation(std::uint64_t steps_done, double loss, double accuracy);
  void gpu(std::uint64_t steps_done, const GpuReading& r);
  // Writes what is held and closes the file.
  void close();

 private:
  bool due(std::uint64_t steps_done) const;
  template <class Write>
  void attempt(Write&& write);

  std::unique_ptr<TensorboardWriter> writer_;
  std::int64_t histogram_every_;
  std::ostream& out_;
  std::optional<std::vector<float>> gradients_;
};

}  // namespace slurm_train
