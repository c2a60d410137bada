#include "train/evaluation.h"

#include <algorithm>
#include <vector>

namespace slurm_train {

StepLoss evaluate_rows(TrainStep& step, const Dataset& data, Normalization norm, RowRange range, int eval_batch) {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  StepLoss sums;
  for (std::size_t begin = range.begin; begin < range.end; begin += static_cast<std::size_t>(eval_batch)) {
    const std::size_t rows = std::min<std::size_t>(static_cast<std::size_t>(eval_batch), range.end - begin);
    normalized_rows(data, begin, rows, norm, x, y);
    const StepLoss r = step.evaluate(x.data(), y.data(), static_cast<int>(rows));
    sums.loss_sum += r.loss_sum;
    sums.correct += r.correct;
  }
  return sums;
}

}  // namespace slurm_train
