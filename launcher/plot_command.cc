#include "launcher/plot_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "launcher/plot_run.h"
#include "launcher/subprocess.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

using Run = PlotRun;
const auto read_run = read_plot_run;

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

// Runs are named by file name; files of the same name (a sweep's folders) by their folder.
std::vector<std::string> run_names(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths) names.push_back(fs::path(p).stem().string());
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t k = 0; k < names.size(); ++k)
      if (i != k && names[i] == fs::path(paths[k]).stem().string()) {
        const fs::path parent = fs::absolute(paths[i]).parent_path();
        names[i] = parent.filename().string();
        break;
      }
  return names;
}

std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void plot(const std::vector<std::string>& paths, const std::string& output, const std::string& title) {
  const std::vector<std::string> names = run_names(paths);
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

  std::string loss_plot, accuracy_plot, speed_plot;
  for (std::size_t r = 0; r < paths.size(); ++r) {
    const Run run = read_run(paths[r]);
    const std::size_t window = std::max<std::size_t>(1, run.step.size() / 50);
    const auto loss_trend = trailing_mean(run.loss, window), accuracy_trend = trailing_mean(run.accuracy, window);
    const auto speed_trend = trailing_mean(run.samples_per_s, window);
    const fs::path steps = tmp / fmt::format("run{}.tsv", r), evals = tmp / fmt::format("run{}-eval.tsv", r);
    std::ofstream s(steps), e(evals);
    for (std::size_t i = 0; i < run.step.size(); ++i)
      s << fmt::format("{}\t{}\t{}\t{}\t{}\n", run.step[i], run.loss[i], loss_trend[i], accuracy_trend[i], speed_trend[i]);
    for (std::size_t i = 0; i < run.eval_step.size(); ++i)
      e << fmt::format("{}\t{}\t{}\n", run.eval_step[i], run.test_loss[i], run.test_accuracy[i]);
    s.close();
    e.close();
    const std::string color = fmt::format("lc {}", r + 1), name = names[r];
    const std::string sep = r == 0 ? "" : ", ";
    loss_plot += fmt::format("{}{} u 1:2 w l {} lw 0.5 dt 3 notitle, {} u 1:3 w l {} lw 2 t {}", sep,
                             gnuplot_quote(steps), color, gnuplot_quote(steps), color, gnuplot_quote(name + " train"));
    accuracy_plot += fmt::format("{}{} u 1:4 w l {} lw 2 t {}", sep, gnuplot_quote(steps), color,
                                 gnuplot_quote(name + " train (batch)"));
    if (!run.eval_step.empty()) {
      loss_plot += fmt::format(", {} u 1:2 w lp {} pt 7 dt 2 t {}", gnuplot_quote(evals), color, gnuplot_quote(name + " test"));
      accuracy_plot += fmt::format(", {} u 1:3 w lp {} pt 7 dt 2 t {}", gnuplot_quote(evals), color,
                                   gnuplot_quote(name + " test"));
    }
    speed_plot += fmt::format("{}{} u 1:5 w l {} lw 2 t {}", sep, gnuplot_quote(steps), color, gnuplot_quote(name));
  }

  const fs::path script = tmp / "plot.gp";
  std::ofstream(script) << fmt::format(
      "set terminal pngcairo size 1200,1100 noenhanced\n"
      "set output {}\n"
      "set multiplot layout 3,1 title {}\n"
      "set grid\nset key outside right top\nset xlabel 'step'\nset lmargin 10\nset rmargin 34\n"
      "set ylabel 'loss'\nplot {}\n"
      "set ylabel 'accuracy (%)'\nplot {}\n"
      "set ylabel 'samples/s'\nplot {}\n"
      "unset multiplot\n",
      gnuplot_quote(output), gnuplot_quote(title), loss_plot, accuracy_plot, speed_plot);
  const ProcessResult r = run_process({"gnuplot", script.string()}, "gnuplot-nox");
  if (r.exit_code != 0) throw std::runtime_error(fmt::format("gnuplot failed (exit {}) drawing {}", r.exit_code, output));
  std::cout << fmt::format("wrote {} ({} run(s))\n", output, paths.size());
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
