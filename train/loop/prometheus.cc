#include "train/loop/prometheus.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

std::string prometheus_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

PrometheusLabels prometheus_labels(const Environment& env) {
  PrometheusLabels labels;
  if (const std::string id = env_value(env, "SLURM_JOB_ID"); !id.empty()) labels.job_id = id;
  if (const std::string name = env_value(env, "SLURM_JOB_NAME"); !name.empty()) labels.job_name = name;
  return labels;
}

std::string prometheus_text(const PrometheusLabels& l, const StepMetrics& m, double test_accuracy,
                            std::uint64_t total_steps, const std::vector<RankSlowdown>& stragglers) {
  const std::string labels = fmt::format("job_id=\"{}\",job_name=\"{}\"", prometheus_label_value(l.job_id),
                                         prometheus_label_value(l.job_name));
  std::string out;
  auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP slurm_train_{} {}\n# TYPE slurm_train_{} gauge\nslurm_train_{}{{{}}} {}\n", name, help,
                       name, name, labels, value);
  };
  gauge("step", "Training steps done.", static_cast<double>(m.step + 1));
  gauge("steps_total", "Training steps the run will do.", static_cast<double>(total_steps));
  gauge("epoch", "Current epoch (0-based).", static_cast<double>(m.epoch));
  gauge("loss", "Training loss of the last step (mean over the global batch).", m.loss);
  gauge("learning_rate", "Learning rate of the last step.", m.lr);
  gauge("grad_norm", "Global gradient norm of the last step, before clipping.", m.grad_norm);
  gauge("samples_per_second", "Training throughput of the last step, over all ranks.", m.samples_per_second);
  if (m.tokens_per_sample > 0)
    gauge("tokens_per_second", "Training throughput of the last step in tokens, over all ranks.",
          m.samples_per_second * static_cast<double>(m.tokens_per_sample));
  gauge("world_size", "Ranks of the job.", l.world_size);
  if (test_accuracy >= 0) gauge("test_accuracy", "Test accuracy of the latest evaluation (0 to 1).", test_accuracy);
  if (!stragglers.empty()) {
    out +=
        "# HELP slurm_train_rank_slowdown A straggler's compute time per step over the ranks' median, when it was "
        "named.\n# TYPE slurm_train_rank_slowdown gauge\n";
    for (const RankSlowdown& s : stragglers)
      out += fmt::format("slurm_train_rank_slowdown{{{},rank=\"{}\",host=\"{}\"}} {}\n", labels, s.rank,
                         prometheus_label_value(s.host), s.slowdown);
  }
  return out;
}

std::string program_prometheus_text(const PrometheusLabels& l, std::uint64_t step,
                                    std::span<const std::pair<std::string, double>> values) {
  const std::string labels = fmt::format("job_id=\"{}\",job_name=\"{}\"", prometheus_label_value(l.job_id),
                                         prometheus_label_value(l.job_name));
  std::string out = fmt::format(
      "# HELP slurm_train_program_step The step the program reported last.\n"
      "# TYPE slurm_train_program_step gauge\nslurm_train_program_step{{{}}} {}\n",
      labels, step);
  if (values.empty()) return out;
  out +=
      "# HELP slurm_train_program_metric The program's figures at that step, by name.\n"
      "# TYPE slurm_train_program_metric gauge\n";
  for (const auto& [name, value] : values)
    out += fmt::format("slurm_train_program_metric{{{},metric=\"{}\"}} {}\n", labels, prometheus_label_value(name),
                       std::isfinite(value) ? fmt::format("{}", value) : std::string("NaN"));
  return out;
}

}  // namespace slurm_train
