// The --train-* options of srun, sbatch and salloc: one table (name, argument, help, the
// SLURM_TRAIN_* variable that gives its default), the record of what the command line gave,
// and the resolution of the effective settings:
//   option > SLURM_TRAIN_* environment default > site configuration > built-in default.
// A bad value names the option (or variable), the value and what is allowed. A value given
// twice with different values is an error.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spank/jobenv/binding.h"
#include "spank/site_config.h"

namespace slurm_train {

enum class OptionId : int { bind = 1, nccl = 2, env = 3, verbose = 4 };

struct OptionSpec {
  OptionId id;
  const char* name;     // without the leading "--"
  const char* arginfo;  // nullptr: a flag
  const char* usage;
  const char* env_var;  // its environment default
};

const std::vector<OptionSpec>& option_table();

// One option's value, and whether it was inherited: srun inside an `sbatch --train-*` job first
// replays sbatch's options from the environment (SLURM_SPANK__SLURM_SPANK_OPTION_*), then its own
// command line, which may override them without that being a contradiction.
struct RecordedValue {
  std::optional<std::string> value;
  bool inherited = false;
};

// What the command line (or Slurm, forwarding it to the nodes) gave.
struct RecordedOptions {
  RecordedValue bind, nccl, env;
  bool verbose = false;
  std::string error;  // the first bad or contradictory value; reported in init_post_opt
};

// Records one occurrence of an option (`inherited`: replayed from the batch job's environment).
// Returns the error message (also kept in recorded.error) or "" when the value is good.
std::string record_option(RecordedOptions& recorded, OptionId id, const char* optarg, bool inherited = false);

// The variable in which Slurm hands an sbatch option to the job's steps.
std::string inherited_option_variable(OptionId id);

struct Settings {
  BindMode bind = BindMode::soft;
  std::string nccl_profile = "off";
  bool nccl_from_option = false;  // named by --train-nccl itself (wins over the user's exports)
  std::string nccl_origin = "plugstack.conf default_profile";  // where the name came from, for errors
  bool env = true;
  bool verbose = false;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The effective settings. Throws InputError for a bad environment default or a recorded error.
// Whether the named profile exists is checked by the caller (it needs the profiles folder).
Settings resolve_settings(const RecordedOptions& recorded, const SiteConfig& site, const EnvLookup& getenv);

}  // namespace slurm_train
