// One run's JSON-lines metrics (train.metrics) as `slurm-train plot` reads them: a line per
// logged step {"step", "loss", "accuracy", "samples_per_s", ...} and a line per evaluation
// {"eval": {"step", "test_loss", "test_accuracy"}}. Parsing is apart from the file so that the
// fuzzer (test/fuzz/plot_run_fuzz.cc) can feed it any text.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace slurm_train {

struct PlotRun {
  std::string name;
  std::vector<double> step, loss, accuracy, samples_per_s;
  std::vector<double> eval_step, test_loss, test_accuracy;
};

// Throws std::runtime_error naming `path` and the line that is no metrics line, or saying that
// the text holds no step metrics.
PlotRun parse_plot_run(std::istream& in, const std::string& path);

// The file `path`, read and parsed.
PlotRun read_plot_run(const std::string& path);

}  // namespace slurm_train
