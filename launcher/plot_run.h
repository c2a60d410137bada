// One run's JSON-lines metrics (train.metrics) as `slurm-train plot` reads them: a line per
// logged step {"step", "loss", "accuracy", "samples_per_s", ...} and a line per evaluation
// {"eval": {"step", "test_loss", "test_accuracy"}}, and on a GPU run a line per evaluation
// {"gpu": {"step", "utilization_percent", "power_watts"}}, each naming its run ("run": the job
// id) where the writer knew one. Lines of the other kinds (stragglers, the run's energy) are not
// drawn. Parsing is apart from the file so that the fuzzer
// (test/fuzz/plot_run_fuzz.cc) can feed it any text.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace slurm_train {

struct PlotRun {
  std::string id;  // the lines' "run"; "" where they name none
  std::vector<double> step, loss, accuracy, samples_per_s;
  std::vector<double> eval_step, test_loss, test_accuracy;
  std::vector<double> gpu_step, gpu_utilization, gpu_power;  // rank 0's GPUs at each evaluation
};

// The runs of one file in the order they first appear: a file that several jobs appended to
// (a fixed train.metrics name) holds one run per job, each drawn as its own. Throws
// std::runtime_error naming `path` and the line that is no metrics line, or saying that a run
// holds no step metrics.
std::vector<PlotRun> parse_plot_runs(std::istream& in, const std::string& path);

// The file `path`, read and parsed.
std::vector<PlotRun> read_plot_runs(const std::string& path);

}  // namespace slurm_train
