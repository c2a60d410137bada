#include "train/checkpoint/checkpoint_resume.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/checkpoint/checkpoint_store.h"

namespace slurm_train {

namespace {

// The counters of a checkpoint this program wrote for this run: a step within its schedule (one
// beyond it would "resume" a run with nothing left to train) and the counters that follow from
// the step as the trainer writes them.
std::string counters_mismatch(const CheckpointCounters& c, const ResumeTarget& t) {
  if (c.step > t.total_steps)
    return fmt::format("its /train/step is {} but this run has {} steps (expected 0 to {})", c.step, t.total_steps,
                       t.total_steps);
  const std::uint64_t per_epoch = t.steps_per_epoch;
  if (per_epoch > 0 && c.epoch != c.step / per_epoch)
    return fmt::format("its /train/epoch is {} but step {} at {} batches per epoch is in epoch {}", c.epoch, c.step,
                       per_epoch, c.step / per_epoch);
  if (per_epoch > 0 && c.batch_in_epoch != c.step % per_epoch)
    return fmt::format("its /train/batch_in_epoch is {} but step {} at {} batches per epoch is batch {}",
                       c.batch_in_epoch, c.step, per_epoch, c.step % per_epoch);
  std::uint64_t samples = 0;
  if (__builtin_mul_overflow(c.step, c.global_batch, &samples) || c.samples_seen != samples)
    return fmt::format("its /train/samples_seen is {} but step {} of global batches of {} is {} samples",
                       c.samples_seen, c.step, c.global_batch, samples);
  if (c.optimizer_steps != c.step)
    return fmt::format("its /optimizer/step_count is {} but its /train/step is {} (expected equal)", c.optimizer_steps,
                       c.step);
  return "";
}

}  // namespace

std::string checkpoint_mismatch(const CheckpointState& c, const ResumeTarget& t) {
  if (std::string model = model_layout_mismatch(c.model, t.model); !model.empty()) return model;
  if (c.optimizer != t.optimizer)
    return fmt::format("it holds {} state but train.optimizer is {}", c.optimizer, t.optimizer);
  // The data position counts global batches of one size, and the shuffle follows the seed.
  if (c.counters.global_batch != t.global_batch)
    return fmt::format("it was written with train.global_batch = {} but this run has {}", c.counters.global_batch,
                       t.global_batch);
  if (c.counters.seed != t.seed)
    return fmt::format("it was written with train.seed = {} but this run has {}", c.counters.seed, t.seed);
  return counters_mismatch(c.counters, t);
}

std::optional<Resumed> resume_from_checkpoint(const std::string& dir, const ResumeTarget& t, Comm& comm,
                                              const std::function<void(const std::string&)>& warn) {
  struct Header {
    std::int32_t found = 0;
    std::uint64_t problem_bytes = 0;
    CheckpointCounters counters;
  } header;
  std::string problem, path, device;
  if (comm.rank() == 0) {
    // The run's buffers lent to the read, and handed back however it ends.
    CheckpointState state;
    const std::size_t sizes[3] = {t.params->size(), t.first->size(), t.second->size()};
    auto lend = [&] {
      std::swap(state.params, *t.params);
      std::swap(state.first, *t.first);
      std::swap(state.second, *t.second);
    };
    lend();
    try {
      const bool found = load_newest_valid_checkpoint(dir, warn, state, &t.model);
      if (found) {
        path = state.path;
        device = state.device;
        problem = checkpoint_mismatch(state, t);
        if (problem.empty() && path != dir + "/" + checkpoint_file_name(state.counters.step))
          problem = fmt::format("its /train/step is {} but its name says another step", state.counters.step);
        if (!problem.empty()) problem = fmt::format("cannot resume from {}: {}", path, problem);
      }
      if (found && problem.empty()) {
        header.found = 1;
        header.counters = state.counters;
        if (state.counters.schedule_total_steps != t.total_steps)
          warn(
              fmt::format("warning: {} was written by a run of {} steps; this one has {}: the learning-rate schedule "
                          "follows this run's length from step {}",
                          path, state.counters.schedule_total_steps, t.total_steps, state.counters.step));
      } else if (!found) {
        // A fresh start: undo what reads of bad checkpoints (of any shape) left in the buffers.
        state.params.resize(sizes[0]);
        initialize_model_parameters(t.model, t.seed, state.params);
        state.first.assign(sizes[1], 0.0f);
        state.second.assign(sizes[2], 0.0f);
      }
    } catch (const std::exception& e) {
      problem = e.what();
    }
    lend();
    header.problem_bytes = problem.size();
  }
  comm.broadcast(&header, sizeof header, 0);
  if (header.problem_bytes > 0) {
    problem.resize(header.problem_bytes);
    comm.broadcast(problem.data(), problem.size(), 0);
    throw CheckpointError(problem);
  }
  if (!header.found) return std::nullopt;
  comm.broadcast(t.params->data(), t.params->size() * sizeof(float), 0);
  comm.broadcast(t.first->data(), t.first->size() * sizeof(float), 0);
  if (!t.second->empty()) comm.broadcast(t.second->data(), t.second->size() * sizeof(float), 0);
  return Resumed{header.counters, path, device};
}

}  // namespace slurm_train
