// One data-parallel training step of a model on one device, as the training loop, the benchmarks
// and the GPU check drive it. The caller sees the step's phases, never the model or the device:
//
//   forward(batch)       logits, the loss and its gradient on this rank's rows
//   backward()           the parameters' gradients; with a Comm, summed over the ranks in
//                        buckets as each layer's are complete
//   local_loss()         this rank's loss sums (waits for the device)
//   finish_gradients()   waits for the last bucket: the gradients are now the global sum
//   clip_gradients()     scales them to the configured global norm; returns the norm before
//   update(lr, step)     the optimizer
//
// The loss all-reduce is the caller's: it folds other flags into the same collective.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "train/models/model_layout.h"

namespace slurm_train {

// This rank's rows of a global batch in host memory; first_row is the global index of the first
// (dropout masks depend on it). A classifier's row is x's features (normalised) and y's label; a
// language model's row is a window of `tokens` [rows, T] and y the tokens that follow each
// [rows, T]. They stay untouched until backward() returns.
struct StepBatch {
  const float* x = nullptr;
  const std::int32_t* y = nullptr;
  int rows = 0;
  std::uint64_t first_row = 0;
  const std::int32_t* tokens = nullptr;
};

struct StepLoss {
  double loss_sum = 0;  // over this rank's predictions (rows, or rows x T tokens), before the loss scale
  long long correct = 0;
};

// The state a checkpoint holds, in host memory, in model_layout()'s packed order: the parameters and
// the optimizer's first and second moments (SGD: its momentum and an empty second).
struct HostState {
  HostVector<float>* params = nullptr;
  HostVector<float>* first = nullptr;
  HostVector<float>* second = nullptr;
};

// This rank's part of the state when the optimizer state is sharded over the ranks
// (train.shard_optimizer): the packed elements [begin, end) of the parameters, which every rank
// holds whole, and of the moments, which this rank alone holds (SGD: `second` empty).
struct StateShard {
  std::size_t begin = 0, end = 0;
  const HostVector<float>* params = nullptr;
  const HostVector<float>* first = nullptr;
  const HostVector<float>* second = nullptr;
};

class TrainStep {
 public:
  virtual ~TrainStep() = default;

  virtual void forward(const StepBatch& batch) = 0;
  virtual void backward() = 0;
  virtual StepLoss local_loss() = 0;
  virtual void finish_gradients() = 0;
  virtual double clip_gradients() = 0;
  virtual void update(float lr, std::uint64_t step) = 0;

  // Loss sums of rows without dropout, label smoothing or gradients (the test set's).
  virtual StepLoss evaluate(const StepBatch& batch) = 0;

  // The model's tensors in the packed (checkpoint) layout.
  virtual const ModelLayout& model_layout() const = 0;
  // Where the state is read and written in host memory: the step's own on the CPU. A device
  // step copies its state there in state_to_host() (before a checkpoint or the end) and back in
  // state_from_host() (after a resume or a broadcast).
  virtual HostState host_state() = 0;
  virtual void state_to_host() {}
  virtual void state_from_host() {}
  // Whether this rank holds only its shard of the optimizer state (train.shard_optimizer on
  // several ranks): its checkpoints are then written by the ranks together.
  virtual bool state_sharded() const { return false; }
  // A device step copies this rank's shard and the parameters to host memory (before a
  // checkpoint the ranks write together; once per update however often it is called); a CPU
  // step's are there already.
  virtual void shard_to_host() {}
  // This rank's shard of the state in host memory, as of the last shard_to_host() (host_state()'s
  // params too); nullopt when every rank holds the whole state. A view: it copies nothing.
  virtual std::optional<StateShard> state_shard() { return std::nullopt; }
  // The gradients summed over the ranks, after finish_gradients() and before clip_gradients(),
  // in the packed layout (a copy; a device step waits for the GPU). nullopt where this rank holds
  // only its shard of them (the optimizer state sharded). For histograms, not for the step.
  virtual std::optional<std::vector<float>> global_gradients() { return std::nullopt; }
};

}  // namespace slurm_train
