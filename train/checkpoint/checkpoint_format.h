// The scalar fields of a checkpoint (checkpoint_file.h has the whole layout): one table that the
// writer, the reader and `ckpt show` all walk, so that a field added here is written, read back,
// checked for its type and shown. Pure: no HDF5.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "train/checkpoint/checkpoint_state.h"

namespace slurm_train {

struct CounterField {
  std::string_view group;  // "/train"
  std::string_view name;   // "step": the scalar dataset /train/step
  std::variant<std::uint64_t CheckpointCounters::*, std::int64_t CheckpointCounters::*, double CheckpointCounters::*>
      member;

  std::string path() const { return std::string(group) + "/" + std::string(name); }
};

// In the order `ckpt show` prints them, grouped.
const std::vector<CounterField>& counter_fields();

// "name value" of each of `group`'s fields, as `ckpt show` prints them.
std::vector<std::string> describe_counters(std::string_view group, const CheckpointCounters& c);

}  // namespace slurm_train
