#include "launcher/config_options.h"

#include <fmt/format.h>

namespace slurm_train {

void add_config_key_options(CLI::App* cmd, const std::shared_ptr<ConfigOptions>& options) {
  for (const std::string& key : config_keys()) {
    cmd->add_option_function<std::string>(
           "--" + key, [options, key](const std::string& value) { options->overrides.emplace_back(key, value); },
           config_key_help(key))
        ->type_name(config_key_type(key))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // the last one given wins
        ->expected(0, 1)  // "--train.metrics=" (empty) is a value: no metrics file
        ->group("Configuration keys (override the file)");
  }
  cmd->allow_extras();
}

void reject_unknown_options(CLI::App* cmd) {
  for (const std::string& extra : cmd->remaining()) {
    const std::string key = extra.rfind("--", 0) == 0 ? extra.substr(2, extra.find('=') - 2) : extra;
    const std::string near = nearest_config_key(key);
    throw CLI::ValidationError(
        fmt::format("unknown option '{}'{}", extra, near.empty() ? "" : fmt::format(" (did you mean '--{}'?)", near)));
  }
}

RunConfig load_run_config(const ConfigOptions& options, const Environment& env) {
  RunConfig config;
  if (!options.file.empty()) apply_config_file(config, options.file);
  std::vector<std::string> environment;
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  apply_config_environment(config, environment);
  for (const auto& [key, value] : options.overrides) apply_config_override(config, key, value);
  const auto problems = validate_config(config);
  if (!problems.empty()) {
    std::string message = "the configuration has problems:";
    for (const auto& p : problems) message += "\n  " + p;
    throw ConfigError(message);
  }
  return config;
}

}  // namespace slurm_train
