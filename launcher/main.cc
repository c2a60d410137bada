// slurm-train: the command every rank runs. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include <iostream>

#include "launcher/build_info.h"

int main(int argc, char** argv) {
  CLI::App app{"slurm-train: data-parallel training on Slurm clusters", "slurm-train"};
  app.set_version_flag("--version", slurm_train::build_info());
  app.footer("See README.md (or $SLURM_TRAIN_HOME/share/doc/slurm-train) for the full guide.");
  CLI11_PARSE(app, argc, argv);
  std::cout << app.help();
  return 0;
}
