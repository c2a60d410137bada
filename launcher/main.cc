// slurm-train: the command every rank runs. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string_view>

#include "launcher/build_info.h"
#include "launcher/ckpt_command.h"
#include "launcher/data_command.h"
#include "launcher/doctor_command.h"
#include "launcher/exec_command.h"
#include "launcher/exit_codes.h"
#include "launcher/launch_position.h"
#include "launcher/plot_command.h"
#include "launcher/run_command.h"
#include "launcher/sample_command.h"
#include "launcher/serve_command.h"
#include "launcher/srun_command.h"
#include "launcher/submit_command.h"
#include "train/io/contained_reads.h"
#include "train/io/crash_contained.h"

int main(int argc, char** argv) {
  if (const auto child = slurm_train::contained_reads_main(argc, argv)) return *child;
  // A run reads its datasets first thing: the server of those reads starts while it parses.
  if (argc > 1 && std::string_view(argv[1]) == "run") slurm_train::start_contained_read_server();
  // What follows `exec ... --` is the supervised program's, not ours to parse.
  const auto exec_line = slurm_train::split_exec_command_line(argc, argv);
  const auto srun_line = slurm_train::split_exec_command_line(argc, argv, "srun");
  CLI::App app{"slurm-train: data-parallel training on Slurm clusters", "slurm-train"};
  app.set_version_flag("--version", slurm_train::build_info());
  // One subcommand at most: once `run` is parsed, a value that names another (`--ckpt.dir ckpt`)
  // is a value, not the `ckpt` subcommand.
  app.require_subcommand(0, 1);
  app.footer(
      "See man slurm-train, and the guides: README.md and docs/ (installed: "
      "$SLURM_TRAIN_HOME/share/doc/slurm-train/docs).");
  int exit_code = 0;
  slurm_train::add_run_command(app, exit_code);
  slurm_train::add_exec_command(app, exit_code, exec_line);
  slurm_train::add_data_command(app);
  slurm_train::add_submit_command(app);
  slurm_train::add_plot_command(app);
  slurm_train::add_doctor_command(app, exit_code);
  slurm_train::add_ckpt_command(app, exit_code);
  slurm_train::add_sample_command(app, exit_code);
  slurm_train::add_serve_command(app, exit_code);
  slurm_train::add_srun_command(app, exit_code, srun_line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Every rank of a job parses the same command line: one copy of the error is enough.
    const auto launch = slurm_train::launch_position(slurm_train::current_environment());
    if (launch.rank == 0) app.exit(e);
    slurm_train::let_rank0_report_first(launch);
    return slurm_train::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "slurm-train: error: " << e.what() << "\n";
    return slurm_train::kExitFailed;
  }
  if (app.get_subcommands().empty()) {
    std::cerr
        << app.help()
        << "slurm-train: a subcommand is required (run, exec, srun, data, submit, plot, doctor, ckpt, sample, serve)\n";
    return slurm_train::kExitUsage;
  }
  return exit_code;
}
