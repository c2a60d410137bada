#include "launcher/run_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "launcher/mpi_session.h"
#include "train/checkpoint_file.h"
#include "train/comm.h"
#include "train/config.h"
#include "train/trainer.h"

namespace slurm_train {

namespace {

struct RunOptions {
  std::string config_file;
  bool print_config = false;
  std::vector<std::pair<std::string, std::string>> overrides;  // in command-line order
};

std::string host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

RunConfig load_config(const RunOptions& o) {
  RunConfig config;
  if (!o.config_file.empty()) apply_config_file(config, o.config_file);
  for (const auto& [key, value] : o.overrides) apply_config_override(config, key, value);
  const auto problems = validate_config(config);
  if (!problems.empty()) {
    std::string message = "the configuration has problems:";
    for (const auto& p : problems) message += "\n  " + p;
    throw ConfigError(message);
  }
  return config;
}

// Every rank runs this; an error on any rank tears the whole job down so that no rank is left
// waiting in a collective for one that is gone.
int run(const RunOptions& options) {
  // Configuration errors are found before MPI starts: the same on every rank, and reported once
  // by each rank's own stderr is acceptable for a job that never started.
  const RunConfig config = load_config(options);
  if (options.print_config) {
    std::cout << describe_config(config);
    return 0;
  }
  MpiSession mpi(nullptr, nullptr);
  std::unique_ptr<Comm> comm = make_mpi_comm();
  try {
    train(config, *comm, std::cout);
    return 0;
  } catch (const CheckpointWriteError& e) {
    // Its own exit code: the job's script can tell "the storage failed" from a training error.
    std::cerr << fmt::format("slurm-train: error: rank {} of {} on {}: {}\n", comm->rank(), comm->size(), host(), e.what())
              << std::flush;
    if (comm->size() > 1) comm->abort(kExitCheckpointWrite);
    return kExitCheckpointWrite;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("slurm-train: error: rank {} of {} on {}: {}\n", comm->rank(), comm->size(), host(), e.what())
              << std::flush;
    if (comm->size() > 1) comm->abort(1);
    return 1;
  }
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "train on every rank of the job (srun --mpi=pmix, mpirun, or alone)");
  cmd->add_option("--config,-c", options->config_file, "TOML file with [data], [model], [train] and [ckpt] sections")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--print-config", options->print_config, "print every effective value and where it came from, then exit");
  for (const std::string& key : config_keys()) {
    cmd->add_option_function<std::string>(
           "--" + key, [options, key](const std::string& value) { options->overrides.emplace_back(key, value); },
           config_key_help(key))
        ->type_name(config_key_type(key))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // the last one given wins
        ->group("Configuration keys (override the file)");
  }
  // Unknown --section.key options are reported with the nearest known key.
  cmd->allow_extras();
  cmd->callback([options, cmd, &exit_code] {
    for (const std::string& extra : cmd->remaining()) {
      std::string key = extra.rfind("--", 0) == 0 ? extra.substr(2, extra.find('=') - 2) : extra;
      const std::string near = nearest_config_key(key);
      throw CLI::ValidationError(fmt::format("unknown option '{}'{}", extra,
                                             near.empty() ? "" : fmt::format(" (did you mean '--{}'?)", near)));
    }
    exit_code = run(*options);
  });
}

}  // namespace slurm_train
