// The metrics reader of `slurm-train plot`: the lines it takes, and lines that lack a field are
// refused with the file and line, never read as missing values.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "launcher/plot_run.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

namespace {
PlotRun parse(const std::string& text) {
  std::istringstream in(text);
  const auto runs = parse_plot_runs(in, "m.jsonl");
  REQUIRE(runs.size() == 1);
  return runs.front();
}
}  // namespace

TEST_CASE("plot: step and evaluation lines of a metrics file") {
  PlotRun run = parse(R"({"step":0,"loss":2.5,"accuracy":0.25,"samples_per_s":100})"
                      "\n\n"
                      R"({"eval":{"step":1,"test_loss":2.0,"test_accuracy":0.5}})"
                      "\n");
  CHECK(run.step == std::vector<double>{0});
  CHECK(run.accuracy == std::vector<double>{25});
  CHECK(run.eval_step == std::vector<double>{1});
  CHECK(run.test_accuracy == std::vector<double>{50});
}

TEST_CASE("plot: a GPU run's lines: rank 0's GPU readings are taken, its straggler and energy lines passed over") {
  PlotRun run = parse(
      R"({"step":0,"loss":2.5,"accuracy":0.25,"samples_per_s":100,"run":"7"})"
      "\n"
      R"({"straggler":{"step":1,"rank":1,"host":"n2","device":"cpu","slowdown":2.0,"compute_s":0.2,"median_s":0.1},"run":"7"})"
      "\n"
      R"({"gpu":{"step":1,"utilization_percent":87.0,"power_watts":412.0,"ranks":[{"rank":0,"utilization_percent":87.0,"power_watts":412.0}]},"run":"7"})"
      "\n"
      R"({"gpu":{"step":2,"ranks":[{"rank":1,"utilization_percent":50.0,"power_watts":300.0}]},"run":"7"})"
      "\n"
      R"({"energy":{"steps":1,"joules":400.0,"joules_per_step":400.0,"joules_per_sample":1.6},"run":"7"})"
      "\n");
  CHECK(run.step == std::vector<double>{0});
  CHECK(run.gpu_step == std::vector<double>{1});
  CHECK(run.gpu_utilization == std::vector<double>{87});
  CHECK(run.gpu_power == std::vector<double>{412});
}

TEST_CASE("plot: a line without a field it needs is refused, naming the file and line") {
  const std::string step = R"({"step":0,"loss":2.5,"accuracy":0.25,"samples_per_s":100})";
  check_refused<std::runtime_error>([&] { parse(step + "\n" + R"({"eval":{"step":1,"test_accuracy":0.5}})"); },
                                    "m.jsonl:2: not a slurm-train metrics line");
  check_refused<std::runtime_error>([&] { parse(step + "\n" + R"({"eval":{}})"); }, "m.jsonl:2:");
  check_refused<std::runtime_error>([&] { parse(R"({"step":0,"loss":2.5})"); }, "m.jsonl:1:");
  check_refused<std::runtime_error>([&] { parse(R"({"eval":{"step":1,"test_loss":2,"test_accuracy":0.5}})"); },
                                    "holds no step metrics");
}

TEST_CASE("plot: a binary file is refused with its bytes escaped, never written raw to the terminal") {
  try {
    parse(
        std::string("\x7f"
                    "ELF\x02\x01\x01",
                    7));
    FAIL("a binary line was taken");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.starts_with("m.jsonl:1: not a slurm-train metrics line"));
    CHECK(what.find("\\x7f") != std::string::npos);
    CHECK(std::all_of(what.begin(), what.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
  }
}

TEST_CASE("plot: the runs of a file that several jobs appended to are told apart by their run id") {
  std::istringstream in(R"({"run":"41","step":0,"loss":2.5,"accuracy":0.25,"samples_per_s":100})"
                        "\n"
                        R"({"run":"41","eval":{"step":1,"test_loss":2.0,"test_accuracy":0.5}})"
                        "\n"
                        R"({"run":"42","step":0,"loss":2.4,"accuracy":0.3,"samples_per_s":90})"
                        "\n"
                        R"({"run":"41","step":1,"loss":2.2,"accuracy":0.35,"samples_per_s":100})"
                        "\n");
  const auto runs = parse_plot_runs(in, "m.jsonl");
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].id == "41");
  CHECK(runs[0].step == std::vector<double>{0, 1});
  CHECK(runs[0].eval_step == std::vector<double>{1});
  CHECK(runs[1].id == "42");
  CHECK(runs[1].step == std::vector<double>{0});
  CHECK(runs[1].eval_step.empty());
  std::istringstream eval_only(R"({"run":"41","step":0,"loss":2.5,"accuracy":0.25,"samples_per_s":100})"
                               "\n"
                               R"({"run":"43","eval":{"step":1,"test_loss":2.0,"test_accuracy":0.5}})"
                               "\n");
  check_refused<std::runtime_error>([&] { parse_plot_runs(eval_only, "m.jsonl"); }, "holds no step metrics of run 43");
}
