#include "launcher/plot_chart.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "launcher/gnuplot_skeleton.h"
#include "test/unit/test_support.h"

using namespace slurm_train;

namespace {

// A run as the reference configuration gives it: 3510 steps, 15 evaluations between 84 and 89.5%.
ChartRun reference_run(const std::string& label) {
  ChartRun r;
  r.label = label;
  r.steps_file = "/tmp/x/run0.tsv";
  r.evals_file = "/tmp/x/run0-eval.tsv";
  r.last_step = 3510;
  for (int e = 1; e <= 15; ++e) r.test_accuracy.push_back(84.0 + 5.5 * (e - 1) / 14.0);
  r.final_eval_step = 3510;
  r.late_train_accuracy = {86.5, 88.0, 91.2};
  return r;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("plot: runs are named by their folder, runs sharing a folder by their file") {
  CHECK(run_labels({"/home/ana/runs/fm/metrics.jsonl"}) == std::vector<std::string>{"fm"});
  CHECK(run_labels({"sweep/lr-0.001/metrics.jsonl", "sweep/lr-0.002/metrics.jsonl"}) ==
        std::vector<std::string>{"lr-0.001", "lr-0.002"});
  CHECK(run_labels({"logs/1234/metrics.jsonl", "logs/1235/metrics.jsonl"}) == std::vector<std::string>{"1234", "1235"});
  CHECK(run_labels({"/r/a.jsonl", "/r/b.jsonl", "/s/c.jsonl"}) == std::vector<std::string>{"r/a", "r/b", "s"});
}

TEST_CASE("plot: a run is labelled with the job id its lines carry, unless its file's label shows it") {
  CHECK(run_label("main", "9170001") == "main job 9170001");
  CHECK(run_label("main/metrics-9170001", "9170001") == "main/metrics-9170001");
  CHECK(run_label("lr-0.001", "") == "lr-0.001");
  CHECK(run_label("fm", "41_3") == "fm job 41_3");
}

TEST_CASE("plot: the accuracy axis spans the accuracies that tell runs apart, not 0-100%") {
  const AxisRange a = accuracy_axis({reference_run("fm")});
  CHECK(a.low == 83);   // 84% minus a 1-point margin
  CHECK(a.high == 93);  // 91.2% plus the margin, rounded up
  ChartRun early = reference_run("other");
  early.test_accuracy = {40.0};
  early.late_train_accuracy = {99.9};
  CHECK(accuracy_axis({reference_run("fm"), early}).low == 34);
  CHECK(accuracy_axis({reference_run("fm"), early}).high == 100);
  CHECK(accuracy_axis({}).low == 0);
}

TEST_CASE(
    "plot: the script ends the step axis at the last step, keeps the legends inside, labels the final accuracy "
    "and says why train loss lies above test loss") {
  const std::string s = chart_script({reference_run("lr-0.001")}, "curves.png", "fm");
  CHECK(has(s, "set xrange [0:3510]\n"));
  CHECK_FALSE(has(s, "outside"));
  CHECK_FALSE(has(s, "rmargin 34"));
  CHECK(has(s, "set yrange [83:93]\n"));
  CHECK(has(s, "set label 1 '89.50%' at 3510, 89.5"));
  CHECK(has(s, "'lr-0.001 test (final 89.50%)'"));
  CHECK(has(s, "'lr-0.001 train'"));
  CHECK(has(s, "with dropout and label smoothing"));
  CHECK(has(s, "so train lies above test"));
}

TEST_CASE("plot: the step axis reaches the last evaluation, one step past the last step metrics") {
  ChartRun r = reference_run("fm");
  r.last_step = 99;
  r.final_eval_step = 100;
  CHECK(has(chart_script({r}, "o.png", "t"), "set xrange [0:100]\n"));
}

TEST_CASE("plot: a sweep's final accuracies are in its legend, not drawn over each other; its legends below") {
  const std::string s = chart_script({reference_run("lr-0.001"), reference_run("lr-0.002")}, "sweep.png", "sweep");
  CHECK_FALSE(has(s, "\nset label"));
  CHECK(has(s, "'lr-0.001 test (final 89.50%)'"));
  CHECK(has(s, "'lr-0.002 test (final 89.50%)'"));
  CHECK(has(s, "set key below"));
  CHECK_FALSE(has(chart_script({reference_run("fm")}, "one.png", "one"), "set key below"));
}

TEST_CASE("plot: a run without evaluations has no test curve and no final label") {
  ChartRun r = reference_run("it's");
  r.evals_file.clear();
  r.test_accuracy.clear();
  const std::string s = chart_script({r}, "o.png", "t");
  CHECK_FALSE(has(s, "set label 1"));
  CHECK_FALSE(has(s, "s test'"));
  CHECK(has(s, "'it''s train'"));
}

TEST_CASE("plot: a GPU run gets a fourth panel of utilisation and power, the step axis named under it") {
  ChartRun r = reference_run("fm");
  CHECK_FALSE(has(chart_script({r}, "o.png", "t"), "layout 4,1"));
  r.gpu_file = "/tmp/x/run0-gpu.tsv";
  const std::string s = chart_script({r}, "o.png", "t");
  CHECK(has(s, "set multiplot layout 4,1"));
  CHECK(has(s, "'/tmp/x/run0-gpu.tsv' u 1:2 w lp lc 1 pt 7 lw 2 t 'fm utilisation'"));
  CHECK(has(s, "u 1:3 axes x1y2 w lp lc 1 pt 6 dt 2 t 'fm power'"));
  // Named once, under the last panel.
  const auto xlabel = s.find("set xlabel 'step (all panels)'");
  REQUIRE(xlabel != std::string::npos);
  CHECK(s.find("set xlabel", xlabel + 1) == std::string::npos);
  CHECK(xlabel > s.find("throughput over all ranks"));
}

TEST_CASE(
    "plot: run names, a title and an output path that hold a newline and a command stay text of the template's "
    "statements") {
  // A folder's name is a run's name: it may hold any byte but '/' and NUL.
  const std::string payload = "\nprint system(\"touch x\")\n";
  const std::vector<std::string> labels = run_labels({"/r/a" + payload + "/metrics.jsonl", "/r/b/metrics.jsonl"});
  REQUIRE(labels[0] == "a" + payload);
  ChartRun one = reference_run(run_label(labels[0], "41" + payload)), two = reference_run(labels[1]);
  two.gpu_file = "/tmp/x/run1-gpu.tsv";
  const std::vector<ChartRun> runs = {one, two};
  const std::string s = chart_script(runs, "|touch /tmp/x'; print system(\"id\") #", "it's" + payload);
  CHECK_FALSE(has(s, "\nprint system"));
  CHECK(has(s, "set output './|touch /tmp/x''; print system(\"id\") #'\n"));
  CHECK(gnuplot_skeleton(s) == gnuplot_skeleton(placeholder_chart_script(runs)));
  CHECK_NOTHROW(check_chart_statements(s, runs));
}

TEST_CASE("plot: a script with a statement its template has not is refused, naming the statement") {
  const std::vector<ChartRun> runs = {reference_run("fm")};
  std::string s = chart_script(runs, "o.png", "t");
  s.insert(s.find("set grid"), "print system('id') # 'x'\n");
  slurm_train::testing::check_refused<std::runtime_error>(
      [&] { check_chart_statements(s, runs); },
      "the chart's gnuplot script has statements its template has not (a run name, the title or a path ended a "
      "statement), from 'print system('')': refusing to run it");
  // Text alone that differs is no other statement.
  CHECK_NOTHROW(check_chart_statements(chart_script({reference_run("other name")}, "/x/y.png", "other"), runs));
}

TEST_CASE("plot: an output path with a control character is refused, naming it") {
  slurm_train::testing::check_refused<std::runtime_error>(
      [] { chart_script({reference_run("fm")}, "a\rb.png", "t"); },
      "the output path (-o) 'a\\x0db.png' holds a control character (byte 1 is \\x0d)");
}
