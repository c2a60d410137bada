// A Prometheus textfile-collector file (node_exporter --collector.textfile.directory): the
// training's latest figures, replaced durably (write_file_durably) every N steps by rank 0, so
// that a site's dashboards see every job without scraping its logs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spank/jobenv/environment.h"
#include "train/loop/metrics.h"

namespace slurm_train {

struct PrometheusLabels {
  std::string job_id = "none";           // SLURM_JOB_ID
  std::string job_name = "slurm-train";  // SLURM_JOB_NAME
  int world_size = 1;
};

// The exposition text of one step (and the latest test accuracy, when there is one), and
// slurm_train_rank_slowdown{rank,host} of every rank named a straggler so far (its slowdown then).
std::string prometheus_text(const PrometheusLabels& labels, const StepMetrics& m, double test_accuracy,
                            std::uint64_t total_steps, const std::vector<RankSlowdown>& stragglers = {});

// The figures a program under `slurm-train exec` reported at `step` (the Python helper's
// heartbeat): slurm_train_program_step and slurm_train_program_metric{metric="NAME"}, each with
// the job's labels; a value that is not finite is written NaN.
std::string program_prometheus_text(const PrometheusLabels& labels, std::uint64_t step,
                                    std::span<const std::pair<std::string, double>> values);

// A label value as the exposition format writes it: backslash, double quote and newline escaped.
std::string prometheus_label_value(const std::string& value);

// The job's labels from Slurm's variables (the defaults above where they are unset).
PrometheusLabels prometheus_labels(const Environment& env);

}  // namespace slurm_train
