#include "launcher/plot_run.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

#include "spank/jobenv/text.h"

namespace slurm_train {

std::vector<PlotRun> parse_plot_runs(std::istream& in, const std::string& path) {
  std::vector<PlotRun> runs;
  auto run_named = [&runs](const std::string& id) -> PlotRun& {
    for (auto& r : runs)
      if (r.id == id) return r;
    runs.push_back(PlotRun{});
    runs.back().id = id;
    return runs.back();
  };
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      // at(), never operator[]: on a const object a missing key is undefined behaviour (an
      // assertion in nlohmann's debug build), where at() throws.
      PlotRun& run = run_named(j.contains("run") ? j.at("run").get<std::string>() : "");
      if (j.contains("straggler") || j.contains("energy")) continue;  // not drawn
      if (j.contains("gpu")) {
        const auto& gpu = j.at("gpu");
        if (!gpu.contains("utilization_percent")) continue;  // rank 0 has no GPU: only the other ranks'
        run.gpu_step.push_back(gpu.at("step").get<double>());
        run.gpu_utilization.push_back(gpu.at("utilization_percent").get<double>());
        run.gpu_power.push_back(gpu.at("power_watts").get<double>());
      } else if (j.contains("eval")) {
        const auto& eval = j.at("eval");
        run.eval_step.push_back(eval.at("step").get<double>());
        run.test_loss.push_back(eval.at("test_loss").get<double>());
        run.test_accuracy.push_back(100.0 * eval.at("test_accuracy").get<double>());
      } else {
        run.step.push_back(j.at("step").get<double>());
        run.loss.push_back(j.at("loss").get<double>());
        run.accuracy.push_back(100.0 * j.at("accuracy").get<double>());
        run.samples_per_s.push_back(j.at("samples_per_s").get<double>());
      }
    } catch (const nlohmann::json::exception& e) {
      // The parser quotes what it last read, which in a binary file is raw bytes.
      throw std::runtime_error(
          fmt::format("{}:{}: not a slurm-train metrics line ({})", path, number, escape_bytes(e.what())));
    }
  }
  if (runs.empty()) throw std::runtime_error(fmt::format("'{}' holds no step metrics", path));
  for (const auto& r : runs)
    if (r.step.empty())
      throw std::runtime_error(r.id.empty() ? fmt::format("'{}' holds no step metrics", path)
                                            : fmt::format("'{}' holds no step metrics of run {}", path, r.id));
  return runs;
}

std::vector<PlotRun> read_plot_runs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read the metrics file '{}'", path));
  return parse_plot_runs(in, path);
}

}  // namespace slurm_train
