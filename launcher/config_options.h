// The configuration options shared by the commands that take a training configuration (run,
// submit): --section.key=value for every key, with unknown options reported with the nearest
// known key.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spank/jobenv/environment.h"
#include "train/config/config.h"

namespace slurm_train {

struct ConfigOptions {
  std::string file;
  std::vector<std::pair<std::string, std::string>> overrides;  // key, value
};

// Adds every --section.key option to `cmd`, and lets unknown options through to
// reject_unknown_options, which names the nearest key. The command adds the file option itself.
void add_config_key_options(CLI::App* cmd, const std::shared_ptr<ConfigOptions>& options);
void reject_unknown_options(CLI::App* cmd);

// Defaults < file < SLURM_TRAIN_<SECTION>_<KEY> environment < command line, then validated;
// throws ConfigError listing every problem.
RunConfig load_run_config(const ConfigOptions& options, const Environment& env);

}  // namespace slurm_train
