// The evaluation on a held-out set, written once for every step (train_step.h): the trainer
// gives each rank its share of the test set and sums the results over the ranks; the GPU check
// evaluates the whole set on the CPU and the GPU and compares.
#pragma once

#include "train/data/batches.h"
#include "train/data/samples.h"
#include "train/steps/train_step.h"

namespace slurm_train {

// Loss and correct-prediction sums of `step` over rows [range.begin, range.end) of `data`,
// eval_batch rows at a time.
StepLoss evaluate_rows(TrainStep& step, const Samples& data, RowRange range, int eval_batch);

}  // namespace slurm_train
