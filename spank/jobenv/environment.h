// The process's environment as one value: read once where a command starts, then passed to
// whatever needs a job's facts (job and step ids, task ids, node lists, what the plugin
// exported). Nothing else in the launcher or the engine reads the environment, so every
// decision taken from it is a pure function of this map, and unit-tested with a literal one.
// (The plugin reads its tasks' environments through Slurm's API instead.)
#pragma once

#include <map>
#include <string>

namespace slurm_train {

using Environment = std::map<std::string, std::string>;

// A snapshot of this process's environment.
Environment current_environment();

// The variable's value; "" when it is unset (Slurm's and ours mean the same by empty and unset).
std::string env_value(const Environment& env, const std::string& name);

}  // namespace slurm_train
