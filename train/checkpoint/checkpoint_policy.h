// Checkpoint decisions that touch no file: the file names, when a step saves, which
// checkpoints the keep policy removes, and choosing the newest one that loads. The file I/O
// (checkpoint_file.*, checkpoint_store.*) calls these, and the unit tests cover them alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace slurm_train {

// "step-00000042.h5": 8 digits so that names sort by step (more digits when a step needs them).
std::string checkpoint_file_name(std::uint64_t step);
// The step of a committed checkpoint's file name; nullopt for anything else, including the
// "step-...h5.tmp" files of writes that never committed.
std::optional<std::uint64_t> checkpoint_step_of(const std::string& file_name);

// Whether the step boundary after `steps_done` steps saves a checkpoint: every `every` steps
// (0: never periodically) and always at the last step.
bool checkpoint_due(std::uint64_t steps_done, std::uint64_t every, std::uint64_t total_steps);

// The steps the keep policy removes from `steps` (any order): all but the newest `keep` (0:
// keep all), except that a step that is a multiple of `keep_every` (> 0) stays too.
std::vector<std::uint64_t> checkpoints_to_remove(std::vector<std::uint64_t> steps, std::uint64_t keep,
                                                 std::uint64_t keep_every);

// The newest of `steps` that `try_load` accepts, trying newest first. try_load returns an empty
// string on success or the reason it refused; each refusal goes to `warn` as one line naming
// the step and the reason. nullopt when none loads.
std::optional<std::uint64_t> choose_newest_valid(std::vector<std::uint64_t> steps,
                                                 const std::function<std::string(std::uint64_t)>& try_load,
                                                 const std::function<void(const std::string&)>& warn);

}  // namespace slurm_train
