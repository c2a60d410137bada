// The chart of `slurm-train plot`: the gnuplot script that draws the loss, accuracy and
// throughput panels of one or several runs (and a GPU panel where a run has GPU lines), the run names in its legends,
// and the accuracy axis. Pure: it reads no file and runs nothing (plot_command.cc does that).
#pragma once

#include <string>
#include <vector>

namespace slurm_train {

// One run as the chart draws it: its legend name, the data files gnuplot reads, and what the
// axes and the labels need to know of its values.
struct ChartRun {
  std::string label;
  std::string steps_file;  // TSV: step, loss, loss trend, accuracy trend (%), samples/s trend
  std::string evals_file;  // TSV: step, test loss, test accuracy (%); empty when no evaluation
  double last_step = 0;
  std::vector<double> test_accuracy;        // % at each evaluation
  double final_eval_step = 0;               // the step of the last evaluation
  std::vector<double> late_train_accuracy;  // % (trend) over the second half of the run
  std::string gpu_file;                     // TSV: step, utilisation (%), power (W); empty: no GPU line
};

struct AxisRange {
  double low = 0, high = 100;
};

// Legend names: the folder each metrics file is in (a sweep's lr-0.001, a job's folder), or,
// for runs whose files share a folder, the file's name without its extension.
std::vector<std::string> run_labels(const std::vector<std::string>& paths);

// One run's legend name: its file's label, with the job id its lines carry unless the label
// already shows it (a per-job file, metrics-<job>.jsonl).
std::string run_label(const std::string& file_label, const std::string& job_id);

// The accuracy axis: the band that every run's test accuracy and its training accuracy over the
// second half span, with a margin, in whole percents within [0, 100]; so that the 85-91% that
// tell runs apart are not squashed at the top of 0-100%. The first steps fall below it.
AxisRange accuracy_axis(const std::vector<ChartRun>& runs);

// The gnuplot script of the chart, which writes a PNG to `output`. Every run name, the title and
// every path in it is a string literal (launcher/gnuplot_text.h); std::runtime_error for an
// output or data path that holds a control character.
std::string chart_script(const std::vector<ChartRun>& runs, const std::string& output, const std::string& title);

// The same chart with every run name, the title and every path as placeholder text: the
// statements chart_script must give for these runs, whatever their names.
std::string placeholder_chart_script(const std::vector<ChartRun>& runs);

// Throws std::runtime_error, naming the first statement that differs, unless `script` has the
// statements of placeholder_chart_script(runs) (launcher/gnuplot_skeleton.h): the check, before
// gnuplot runs it, that no name, title or path added a command.
void check_chart_statements(const std::string& script, const std::vector<ChartRun>& runs);

}  // namespace slurm_train
