#include "train/checkpoint_resume.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "train/checkpoint_file.h"
#include "train/checkpoint_policy.h"
#include "train/checkpoint_store.h"

namespace slurm_train {

namespace {

std::string shape_text(const std::vector<LayerLayout>& layers) {
  std::string s;
  for (const auto& L : layers) s += fmt::format("{}{}x{}", s.empty() ? "" : ", ", L.out, L.in);
  return "[" + s + "]";
}

}  // namespace

std::string checkpoint_mismatch(const CheckpointState& c, const ResumeTarget& t) {
  bool same_layers = c.layers.size() == t.layers.size();
  for (std::size_t i = 0; same_layers && i < c.layers.size(); ++i)
    same_layers = c.layers[i].in == t.layers[i].in && c.layers[i].out == t.layers[i].out;
  if (!same_layers)
    return fmt::format("its layers (out x in) are {} but this run's model has {}", shape_text(c.layers), shape_text(t.layers));
  if (c.optimizer != t.optimizer)
    return fmt::format("it holds {} state but train.optimizer is {}", c.optimizer, t.optimizer);
  // The data position counts global batches of one size, and the shuffle follows the seed.
  if (c.counters.global_batch != t.global_batch)
    return fmt::format("it was written with train.global_batch = {} but this run has {}", c.counters.global_batch,
                       t.global_batch);
  if (c.counters.seed != t.seed)
    return fmt::format("it was written with train.seed = {} but this run has {}", c.counters.seed, t.seed);
  return "";
}

std::optional<Resumed> resume_from_checkpoint(const std::string& dir, const ResumeTarget& t, Comm& comm,
                                              const std::function<void(const std::string&)>& warn) {
  struct Header {
    std::int32_t found = 0;
    std::uint64_t problem_bytes = 0;
    CheckpointCounters counters;
  } header;
  std::string problem, path;
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
      const bool found = load_newest_valid_checkpoint(dir, warn, state);
      if (found) {
        path = dir + "/" + checkpoint_file_name(state.counters.step);
        problem = checkpoint_mismatch(state, t);
        if (!problem.empty()) problem = fmt::format("cannot resume from {}: {}", path, problem);
      }
      if (found && problem.empty()) {
        header.found = 1;
        header.counters = state.counters;
        if (state.counters.schedule_total_steps != t.total_steps)
          warn(fmt::format("warning: {} was written by a run of {} steps; this one has {}: the learning-rate schedule "
                           "follows this run's length from step {}",
                           path, state.counters.schedule_total_steps, t.total_steps, state.counters.step));
      } else if (!found) {
        // A fresh start: undo what reads of bad checkpoints (of any shape) left in the buffers.
        state.params.resize(sizes[0]);
        initialize_parameters(t.layers, t.seed, state.params);
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
  return Resumed{header.counters, path};
}

}  // namespace slurm_train
