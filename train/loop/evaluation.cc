#include "train/loop/evaluation.h"

#include <algorithm>

namespace slurm_train {

StepLoss evaluate_rows(TrainStep& step, const Samples& data, RowRange range, int eval_batch) {
  Batch b;
  StepLoss sums;
  for (std::size_t begin = range.begin; begin < range.end; begin += static_cast<std::size_t>(eval_batch)) {
    const std::size_t rows = std::min<std::size_t>(static_cast<std::size_t>(eval_batch), range.end - begin);
    data.gather_range(begin, rows, b);
    const StepLoss r = step.evaluate({b.x.data(), b.y.data(), b.rows, begin, b.tokens.data()});
    sums.loss_sum += r.loss_sum;
    sums.correct += r.correct;
  }
  return sums;
}

}  // namespace slurm_train
