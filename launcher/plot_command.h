// `slurm-train plot METRICS... -o FILE.png`: loss, accuracy and throughput curves of one or
// several runs (a sweep) on one chart, drawn by gnuplot from the runs' JSON-lines metrics.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_plot_command(CLI::App& app);

}  // namespace slurm_train
