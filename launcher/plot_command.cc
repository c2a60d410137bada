#include "launcher/plot_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "launcher/plot_chart.h"
#include "launcher/plot_run.h"
#include "launcher/subprocess.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

// Mean of the last `window` values at each point: the trend through batch-to-batch noise.
std::vector<double> trailing_mean(const std::vector<double>& v, std::size_t window) {
  std::vector<double> out(v.size());
  double sum = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    if (i >= window) sum -= v[i - window];
    out[i] = sum / static_cast<double>(std::min(i + 1, window));
  }
  return out;
}

// The run's series as gnuplot reads them (TSV files under `tmp`), with what the chart's axes and
// labels need to know.
ChartRun chart_run(const PlotRun& run, const std::string& label, const fs::path& tmp, std::size_t index) {
  const std::size_t window = std::max<std::size_t>(1, run.step.size() / 50);
  const auto loss_trend = trailing_mean(run.loss, window), accuracy_trend = trailing_mean(run.accuracy, window);
  const auto speed_trend = trailing_mean(run.samples_per_s, window);
  ChartRun c;
  c.label = label;
  c.steps_file = (tmp / fmt::format("run{}.tsv", index)).string();
  std::ofstream s(c.steps_file);
  for (std::size_t i = 0; i < run.step.size(); ++i)
    s << fmt::format("{}\t{}\t{}\t{}\t{}\n", run.step[i], run.loss[i], loss_trend[i], accuracy_trend[i],
                     speed_trend[i]);
  if (!s.flush()) throw std::runtime_error(fmt::format("cannot write the plot data '{}'", c.steps_file));
  c.last_step = run.step.back();
  c.late_train_accuracy.assign(accuracy_trend.begin() + static_cast<std::ptrdiff_t>(accuracy_trend.size() / 2),
                               accuracy_trend.end());
  if (!run.gpu_step.empty()) {
    c.gpu_file = (tmp / fmt::format("run{}-gpu.tsv", index)).string();
    std::ofstream g(c.gpu_file);
    for (std::size_t i = 0; i < run.gpu_step.size(); ++i)
      g << fmt::format("{}\t{}\t{}\n", run.gpu_step[i], run.gpu_utilization[i], run.gpu_power[i]);
    if (!g.flush()) throw std::runtime_error(fmt::format("cannot write the plot data '{}'", c.gpu_file));
  }
  if (run.eval_step.empty()) return c;
  c.evals_file = (tmp / fmt::format("run{}-eval.tsv", index)).string();
  std::ofstream e(c.evals_file);
  for (std::size_t i = 0; i < run.eval_step.size(); ++i)
    e << fmt::format("{}\t{}\t{}\n", run.eval_step[i], run.test_loss[i], run.test_accuracy[i]);
  if (!e.flush()) throw std::runtime_error(fmt::format("cannot write the plot data '{}'", c.evals_file));
  c.test_accuracy = run.test_accuracy;
  c.final_eval_step = run.eval_step.back();
  return c;
}

void plot(const std::vector<std::string>& paths, const std::string& output, const std::string& title) {
  const std::vector<std::string> labels = run_labels(paths);
  char pattern[] = "/tmp/slurm-train-plot-XXXXXX";
  if (!mkdtemp(pattern)) throw std::runtime_error("cannot create a temporary folder for the plot data");
  const fs::path tmp = pattern;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmp};

  std::vector<ChartRun> runs;
  for (std::size_t f = 0; f < paths.size(); ++f) {
    const std::vector<PlotRun> in_file = read_plot_runs(paths[f]);
    for (const auto& run : in_file) {
      runs.push_back(chart_run(run, run_label(labels[f], run.id), tmp, runs.size()));
    }
  }
  const std::string text = chart_script(runs, output, title);
  check_chart_statements(text, runs);
  const fs::path script = tmp / "plot.gp";
  std::ofstream(script) << text;
  const ProcessResult r = run_process({"gnuplot", script.string()}, "gnuplot-nox");
  if (r.exit_code != 0)
    throw std::runtime_error(fmt::format("gnuplot failed (exit {}) drawing {}", r.exit_code, output));
  std::cout << fmt::format("wrote {} ({} run(s))\n", output, runs.size());
}

}  // namespace

void add_plot_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> metrics;
    std::string output, title = "slurm-train";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("plot", "draw loss, accuracy and throughput curves of one or several runs");
  cmd->add_option("METRICS", o->metrics, "JSON-lines metrics files (train.metrics), one per run")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o->output, "PNG file to write")->required();
  cmd->add_option("--title", o->title, "chart title")->capture_default_str();
  cmd->callback([o] { plot(o->metrics, o->output, o->title); });
}

}  // namespace slurm_train
