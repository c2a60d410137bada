// A Prometheus textfile-collector file (node_exporter --collector.textfile.directory): the
// training's latest figures, rewritten atomically (temporary file + rename) every N steps by
// rank 0, so that a site's dashboards see every job without scraping its logs.
#pragma once

#include <cstdint>
#include <string>

#include "train/metrics.h"

namespace slurm_train {

struct PrometheusLabels {
  std::string job_id;    // SLURM_JOB_ID, or "none"
  std::string job_name;  // SLURM_JOB_NAME, or "slurm-train"
  int world_size = 1;
};

// The exposition text of one step (and the latest test accuracy, when there is one).
std::string prometheus_text(const PrometheusLabels& labels, const StepMetrics& m, double test_accuracy,
                            std::uint64_t total_steps);

// Writes `text` to `path` through `path`.tmp and a rename; throws naming the path.
void write_file_atomically(const std::string& path, const std::string& text);

PrometheusLabels prometheus_labels_from_environment(int world_size);

}  // namespace slurm_train
