// libFuzzer target: the gnuplot script of `slurm-train plot` on names nobody chose well. Any bytes
// as the metrics files' paths (their folders and names become run names), the runs' ids, the
// title and the output path go into run_labels, run_label and chart_script; the script must have
// the statements of its template on placeholder text (launcher/gnuplot_skeleton.h), or a name
// could run a command. An output path with a control character may be refused; any other refusal
// is a finding too.
//
// Input (libFuzzer's FuzzedDataProvider): its last byte picks 1-3 files, the byte before says
// which runs have evaluations (bit 2i) and GPU lines (bit 2i+1); from the front, strings each
// ended by a backslash and another character ("\\" is a backslash): the title, the output path,
// then each file's path and its run id. Seeds: test/fuzz/seeds/plot_script_fuzz/.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/gnuplot_skeleton.h"
#include "launcher/plot_chart.h"

using namespace slurm_train;

namespace {

bool has_control(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

ChartRun run_named(const std::string& label, std::size_t i, unsigned flags) {
  ChartRun r;
  r.label = label;
  const std::string dir = "/tmp/slurm-train-plot-Ab3dEf/";
  r.steps_file = dir + "run" + std::to_string(i) + ".tsv";
  r.last_step = 3510;
  r.late_train_accuracy = {86.5, 88.0};
  if (flags >> (2 * i) & 1) {
    r.evals_file = dir + "run" + std::to_string(i) + "-eval.tsv";
    r.test_accuracy = {84.0, 89.5};
    r.final_eval_step = 3510;
  }
  if (flags >> (2 * i + 1) & 1) r.gpu_file = dir + "run" + std::to_string(i) + "-gpu.tsv";
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::size_t files = in.ConsumeIntegralInRange<std::size_t>(1, 3);
  const unsigned flags = in.ConsumeIntegral<std::uint8_t>();
  const std::string title = in.ConsumeRandomLengthString(), output = in.ConsumeRandomLengthString();
  std::vector<std::string> paths, ids;
  for (std::size_t f = 0; f < files; ++f) {
    paths.push_back(in.ConsumeRandomLengthString());
    if (paths.back().empty()) paths.back() = "metrics.jsonl";  // the command line takes existing files only
    ids.push_back(in.ConsumeRandomLengthString());
  }
  const std::vector<std::string> labels = run_labels(paths);
  if (labels.size() != files) std::abort();
  std::vector<ChartRun> runs;
  for (std::size_t f = 0; f < files; ++f) runs.push_back(run_named(run_label(labels[f], ids[f]), f, flags));

  std::string script;
  try {
    script = chart_script(runs, output, title);
  } catch (const std::runtime_error&) {
    if (!output.empty() && !has_control(output)) std::abort();  // a path gnuplot can take, refused
    script = chart_script(runs, "/tmp/chart.png", title);
  }
  if (gnuplot_skeleton(script) != gnuplot_skeleton(placeholder_chart_script(runs))) std::abort();
  return 0;
}
