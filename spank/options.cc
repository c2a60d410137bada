#include "spank/options.h"

#include "spank/jobenv/env_names.h"
#include "spank/jobenv/nccl_profile.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {OptionId::bind, "train-bind", "soft|strict|none",
       "spank_train: GPU/CPU binding per task: soft (all GPUs, nearest first), strict (own share), none "
       "[SLURM_TRAIN_BIND]",
       env_names::kBind},
      {OptionId::nccl, "train-nccl", "PROFILE|off",
       "spank_train: NCCL settings from a site profile (ib, roce, tcp, off, ...) "
       "[SLURM_TRAIN_NCCL]",
       env_names::kNccl},
      {OptionId::env, "train-env", "on|off",
       "spank_train: export RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... (default on) [SLURM_TRAIN_ENV]",
       env_names::kEnv},
      {OptionId::verbose, "train-verbose", nullptr,
       "spank_train: one line per task on stderr: host, ranks, GPUs, CPUs, profile [SLURM_TRAIN_VERBOSE=1]",
       env_names::kVerbose},
  };
  return table;
}

namespace {

const OptionSpec& spec(OptionId id) {
  for (const auto& s : option_table())
    if (s.id == id) return s;
  throw std::logic_error("unknown option id");
}

// Checks a value of option or variable `what` (`note` follows the value in messages); throws
// InputError naming it.
void check_value(OptionId id, const std::string& what, std::string_view value, const std::string& note = "") {
  check_text(what, value, 64);
  auto bad = [&](const char* expected) {
    return InputError(what + "=" + quote_value(value) + note + ": expected " + expected);
  };
  switch (id) {
    case OptionId::bind:
      if (!parse_bind_mode(value)) throw bad("soft, strict or none");
      return;
    case OptionId::nccl:
      check_profile_name(what + note, value);
      return;
    case OptionId::env:
      if (value != "on" && value != "off") throw bad("on or off");
      return;
    case OptionId::verbose:
      if (value != "0" && value != "1" && value != "on" && value != "off") throw bad("1, 0, on or off");
      return;
  }
}

}  // namespace

std::string record_option(RecordedOptions& recorded, OptionId id, const char* optarg, bool inherited) {
  const OptionSpec& s = spec(id);
  std::string what = std::string("--") + s.name;
  std::string message;
  auto keep = [&](RecordedValue& slot) {
    if (!optarg) {
      message = what + ": expected a value (" + s.arginfo + ")";
      return;
    }
    try {
      check_value(id, what, optarg);
    } catch (const InputError& e) {
      message = e.what();
      return;
    }
    if (slot.value && *slot.value != optarg && !slot.inherited) {
      message = what + " is given twice with different values (" + quote_value(*slot.value) + " and " +
                quote_value(optarg) + ")";
      return;
    }
    slot.inherited = inherited && !slot.value;
    slot.value = optarg;
  };
  switch (id) {
    case OptionId::bind:
      keep(recorded.bind);
      break;
    case OptionId::nccl:
      keep(recorded.nccl);
      break;
    case OptionId::env:
      keep(recorded.env);
      break;
    case OptionId::verbose:
      recorded.verbose = true;
      break;
  }
  if (!message.empty() && recorded.error.empty()) recorded.error = message;
  return message;
}

std::string inherited_option_variable(OptionId id) {
  std::string name = spec(id).name;
  for (char& c : name)
    if (c == '-') c = '_';
  return "SLURM_SPANK__SLURM_SPANK_OPTION_spank_train_" + name;
}

Settings resolve_settings(const RecordedOptions& recorded, const SiteConfig& site, const EnvLookup& getenv) {
  if (!recorded.error.empty()) throw InputError(recorded.error);
  auto from_env = [&](OptionId id) -> std::optional<std::string> {
    const OptionSpec& s = spec(id);
    auto value = getenv(s.env_var);
    if (!value) return std::nullopt;
    check_value(id, s.env_var, *value, std::string(" (the default of --") + s.name + ")");
    return value;
  };
  Settings settings;
  auto bind = recorded.bind.value ? recorded.bind.value : from_env(OptionId::bind);
  settings.bind = bind ? *parse_bind_mode(*bind) : site.bind;
  auto nccl = recorded.nccl.value ? recorded.nccl.value : from_env(OptionId::nccl);
  settings.nccl_from_option = recorded.nccl.value.has_value();
  settings.nccl_profile = nccl ? *nccl : site.default_profile;
  if (nccl) settings.nccl_origin = settings.nccl_from_option ? "--train-nccl" : env_names::kNccl;
  auto env = recorded.env.value ? recorded.env.value : from_env(OptionId::env);
  settings.env = env ? *env == "on" : site.env;
  auto verbose = recorded.verbose ? std::optional<std::string>("1") : from_env(OptionId::verbose);
  settings.verbose = verbose && (*verbose == "1" || *verbose == "on");
  return settings;
}

}  // namespace slurm_train
