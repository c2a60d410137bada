#include "launcher/plot_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "launcher/gnuplot_skeleton.h"
#include "launcher/gnuplot_text.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

bool has_duplicates(const std::vector<std::string>& names) {
  std::map<std::string, int> count;
  for (const auto& n : names)
    if (++count[n] > 1) return true;
  return false;
}

std::string panel(const std::string& ylabel, const std::string& key, const std::string& note) {
  return fmt::format("set ylabel {}\nset key {} opaque box samplen 2\nset title {}\n", gnuplot_text(ylabel), key,
                     gnuplot_text(note));
}

}  // namespace

std::vector<std::string> run_labels(const std::vector<std::string>& paths) {
  std::vector<std::string> folders, stems, given;
  for (const auto& p : paths) {
    folders.push_back(fs::absolute(p).lexically_normal().parent_path().filename().string());
    stems.push_back(fs::path(p).stem().string());
    given.push_back(p);
  }
  if (!has_duplicates(folders)) return folders;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const bool shared = std::count(folders.begin(), folders.end(), folders[i]) > 1;
    names.push_back(shared ? folders[i] + "/" + stems[i] : folders[i]);
  }
  return has_duplicates(names) ? given : names;
}

std::string run_label(const std::string& file_label, const std::string& job_id) {
  if (job_id.empty() || file_label.find(job_id) != std::string::npos) return file_label;
  return file_label + " job " + job_id;
}

AxisRange accuracy_axis(const std::vector<ChartRun>& runs) {
  double low = 100, high = 0;
  for (const auto& r : runs) {
    for (double a : r.test_accuracy) low = std::min(low, a), high = std::max(high, a);
    for (double a : r.late_train_accuracy) low = std::min(low, a), high = std::max(high, a);
  }
  if (low > high) return {};
  const double margin = std::max(1.0, 0.1 * (high - low));
  return {std::max(0.0, std::floor(low - margin)), std::min(100.0, std::ceil(high + margin))};
}

std::string chart_script(const std::vector<ChartRun>& runs, const std::string& output, const std::string& title) {
  double last_step = 1;
  // Step metrics count from 0 and an evaluation names the steps done: the last one lies at N.
  for (const auto& r : runs) last_step = std::max({last_step, r.last_step, r.final_eval_step});
  std::string loss, accuracy, speed, gpu, final_labels;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ChartRun& r = runs[i];
    const std::string sep = i == 0 ? "" : ", ", color = fmt::format("lc {}", i + 1);
    const std::string steps = gnuplot_path("the plot data file", r.steps_file);
    loss += fmt::format("{}{} u 1:2 w l {} lw 0.5 dt 3 notitle, {} u 1:3 w l {} lw 2 t {}", sep, steps, color, steps,
                        color, gnuplot_text(r.label + " train"));
    accuracy += fmt::format("{}{} u 1:4 w l {} lw 2 t {}", sep, steps, color, gnuplot_text(r.label + " train"));
    speed += fmt::format("{}{} u 1:5 w l {} lw 2 t {}", sep, steps, color, gnuplot_text(r.label));
    if (!r.gpu_file.empty()) {
      const std::string file = gnuplot_path("the plot data file", r.gpu_file);
      gpu += fmt::format("{}{} u 1:2 w lp {} pt 7 lw 2 t {}, {} u 1:3 axes x1y2 w lp {} pt 6 dt 2 t {}",
                         gpu.empty() ? "" : ", ", file, color, gnuplot_text(r.label + " utilisation"), file, color,
                         gnuplot_text(r.label + " power"));
    }
    if (r.evals_file.empty() || r.test_accuracy.empty()) continue;
    const double final_accuracy = r.test_accuracy.back();
    const std::string evals = gnuplot_path("the plot data file", r.evals_file);
    loss += fmt::format(", {} u 1:2 w lp {} pt 7 dt 2 t {}", evals, color, gnuplot_text(r.label + " test"));
    accuracy += fmt::format(", {} u 1:3 w lp {} pt 7 dt 2 t {}", evals, color,
                            gnuplot_text(fmt::format("{} test (final {:.2f}%)", r.label, final_accuracy)));
    // One run: its final accuracy beside the last point. A sweep's runs end close together, so
    // their labels would cover each other: the legend gives each run's final value instead.
    if (runs.size() == 1)
      final_labels =
          fmt::format("set label 1 {} at {}, {} right offset -1, 1 tc lt 1 boxed front\n",
                      gnuplot_text(fmt::format("{:.2f}%", final_accuracy)), r.final_eval_step, final_accuracy);
  }
  const AxisRange acc = accuracy_axis(runs);
  // Inside the panel where the curves leave room (loss falls, accuracy rises); a sweep's longer
  // legends go in a band under their panel rather than over its curves.
  const bool sweep = runs.size() > 1;
  const std::string loss_key = sweep ? "below" : "inside top right",
                    accuracy_key = sweep ? "below" : "inside bottom right";
  // The panels share the step axis, named once under the last (a sweep's legends take the room
  // under the others). A GPU run's utilisation and power make a fourth panel.
  const bool gpus = !gpu.empty();
  const std::string xlabel = "set xlabel 'step (all panels)'\n";
  const std::string gpu_panel =
      gpus ? fmt::format(
                 "set offsets 0, 0, 0, 0\nset yrange [0:105]\nset y2range [0:*]\nset y2tics\nset y2label "
                 "'power (W)'\n{}{}plot {}\n",
                 xlabel,
                 panel("GPU utilisation (%)", "inside bottom right",
                       "rank 0's GPUs at each evaluation: utilisation (solid, left) and power (dashed, right)"),
                 gpu)
           : "";
  return fmt::format(
      "set terminal pngcairo size 1200,{} noenhanced\n"
      "set output {}\n"
      "set multiplot layout {},1 title {}\n"
      "set grid\nset style textbox opaque noborder\nset xrange [0:{}]\nset lmargin 10\nset rmargin {}\n"
      "{}plot {}\n"
      "{}{}set yrange [{}:{}]\nplot {}\nunset label\nset autoscale y\n"
      "set offsets 0, 0, graph 0.25, 0\n{}{}plot {}\n{}"
      "unset multiplot\n",
      gpus ? 1450 : 1100, gnuplot_path("the output path (-o)", output), gpus ? 4 : 3, gnuplot_text(title), last_step,
      gpus ? 10 : 3,
      panel("loss", loss_key,
            "loss: train as trained (with dropout and label smoothing when set), test without them: so train lies "
            "above test"),
      loss,
      panel("accuracy (%)", accuracy_key,
            fmt::format("accuracy: test after each epoch, final value in the legend; train over its batches (with "
                        "dropout); axis {:.0f}-{:.0f}%",
                        acc.low, acc.high)),
      final_labels, acc.low, acc.high, accuracy, gpus ? "" : xlabel,
      panel("samples/s", "inside top right", "throughput over all ranks"), speed, gpu_panel);
}

std::string placeholder_chart_script(const std::vector<ChartRun>& runs) {
  std::vector<ChartRun> plain = runs;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    ChartRun& r = plain[i];
    r.label = fmt::format("run {}", i);
    r.steps_file = fmt::format("/plot/run{}.tsv", i);
    if (!r.evals_file.empty()) r.evals_file = fmt::format("/plot/run{}-eval.tsv", i);
    if (!r.gpu_file.empty()) r.gpu_file = fmt::format("/plot/run{}-gpu.tsv", i);
  }
  return chart_script(plain, "/plot/chart.png", "title");
}

void check_chart_statements(const std::string& script, const std::vector<ChartRun>& runs) {
  const std::string got = gnuplot_skeleton(script), expected = gnuplot_skeleton(placeholder_chart_script(runs));
  if (got == expected) return;
  std::size_t at = 0;  // where the first statement that differs starts
  for (std::size_t i = 0; i < got.size() && i < expected.size() && got[i] == expected[i]; ++i)
    if (got[i] == '\n') at = i + 1;
  throw std::runtime_error(fmt::format(
      "the chart's gnuplot script has statements its template has not (a run name, the title or a path ended a "
      "statement), from '{}': refusing to run it",
      escape_bytes(got.substr(at, got.find('\n', at) - at))));
}

}  // namespace slurm_train
