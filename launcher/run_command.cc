#include "launcher/run_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "launcher/config_checks.h"
#include "launcher/config_options.h"
#include "launcher/mpi_session.h"
#include "train/checkpoint_file.h"
#include "train/comm.h"
#include "train/config.h"
#include "train/trainer.h"

namespace slurm_train {

namespace {

struct RunOptions {
  std::shared_ptr<ConfigOptions> config = std::make_shared<ConfigOptions>();
  bool print_config = false;
  bool dry_run = false;
};

std::string host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Every rank runs this; an error on any rank tears the whole job down so that no rank is left
// waiting in a collective for one that is gone.
int run(const RunOptions& options) {
  // Configuration errors are found before MPI starts: the same on every rank, and reported once
  // by each rank's own stderr is acceptable for a job that never started.
  const RunConfig config = load_run_config(*options.config);
  if (options.print_config) {
    std::cout << describe_config(config);
    return 0;
  }
  if (options.dry_run) {
    const auto checks = check_configuration(config, current_environment());
    for (const auto& c : checks) std::cout << format_check(c) << "\n";
    std::cout << (any_failed(checks) ? "dry run: problems found, nothing was trained\n" : "dry run: ready to train\n");
    return any_failed(checks) ? 1 : 0;
  }
  // Open MPI busy-polls while a rank waits in a collective; with ranks sharing cores (or a
  // prefetch thread beside them) that takes the CPU from the ranks still computing. Yielding
  // costs a few microseconds a wait and doubled throughput on a loaded node (make bench).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
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
  cmd->add_flag("--print-config", options->print_config, "print every effective value and where it came from, then exit");
  cmd->add_flag("--dry-run", options->dry_run,
                "check the configuration and the files it names (datasets, output folders), then exit: 0 or 1");
  cmd->add_option("--config,-c", options->config->file, "TOML file with [data], [model], [train] and [ckpt] sections")
      ->check(CLI::ExistingFile);
  add_config_key_options(cmd, options->config);
  cmd->callback([options, cmd, &exit_code] {
    reject_unknown_options(cmd);
    exit_code = run(*options);
  });
}

}  // namespace slurm_train
