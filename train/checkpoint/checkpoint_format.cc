#include "train/checkpoint/checkpoint_format.h"

#include <fmt/format.h>

#include <type_traits>

namespace slurm_train {

const std::vector<CounterField>& counter_fields() {
  using C = CheckpointCounters;
  static const std::vector<CounterField> fields = {
      {"/train", "step", &C::step},
      {"/train", "epoch", &C::epoch},
      {"/train", "batch_in_epoch", &C::batch_in_epoch},
      {"/train", "samples_seen", &C::samples_seen},
      {"/train", "seed", &C::seed},
      {"/train", "global_batch", &C::global_batch},
      {"/train", "schedule_total_steps", &C::schedule_total_steps},
      {"/train", "next_lr", &C::next_lr},
      {"/train", "epoch_loss_sum", &C::epoch_loss_sum},
      {"/train", "epoch_seconds", &C::epoch_seconds},
      {"/train", "world_size", &C::world_size},
      {"/optimizer", "step_count", &C::optimizer_steps},
  };
  return fields;
}

std::vector<std::string> describe_counters(std::string_view group, const CheckpointCounters& c) {
  std::vector<std::string> out;
  for (const CounterField& f : counter_fields()) {
    if (f.group != group) continue;
    out.push_back(std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), double CheckpointCounters::*>)
            return fmt::format("{} {:.6g}", f.name, c.*member);
          else
            return fmt::format("{} {}", f.name, c.*member);
        },
        f.member));
  }
  return out;
}

}  // namespace slurm_train
