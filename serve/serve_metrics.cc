#include "serve/serve_metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "train/loop/prometheus.h"

namespace slurm_train {

namespace {

const std::vector<double> kLatencyBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kBatchBounds{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

}  // namespace

ServeMetrics::ServeMetrics(std::string kind, std::string file, std::uint64_t step)
    : kind_(std::move(kind)), file_(std::move(file)), step_(step) {
  batches_.counts.assign(kBatchBounds.size() + 1, 0);
}

std::string_view ServeMetrics::path_label(std::string_view path) {
  for (std::string_view p : {"/predict", "/generate", "/health", "/metrics"})
    if (path == p) return p;
  return "other";
}

void ServeMetrics::observe(Histogram& h, const std::vector<double>& bounds, double value) {
  if (h.counts.empty()) h.counts.assign(bounds.size() + 1, 0);
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++h.counts[static_cast<std::size_t>(at)];
  h.sum += value;
  ++h.count;
}

void ServeMetrics::request_started() {
  std::lock_guard lock(mutex_);
  ++in_flight_;
}

void ServeMetrics::request_finished(std::string_view path, int status, double seconds) {
  const std::string label(path_label(path));
  std::lock_guard lock(mutex_);
  ++requests_[{label, status}];
  if (seconds < 0) return;
  --in_flight_;
  observe(latency_[label], kLatencyBounds, seconds);
}

void ServeMetrics::batch(int rows) {
  std::lock_guard lock(mutex_);
  observe(batches_, kBatchBounds, rows);
}

void ServeMetrics::generated(int tokens) {
  std::lock_guard lock(mutex_);
  generated_tokens_ += static_cast<std::uint64_t>(tokens);
}

void ServeMetrics::render(std::string& out, std::string_view name, std::string_view labels, const Histogram& h,
                          const std::vector<double>& bounds) {
  const std::string sep = labels.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += h.counts.empty() ? 0 : h.counts[i];
    const std::string le = i < bounds.size() ? fmt::format("{}", bounds[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, le, cumulative);
  }
  const std::string braces = labels.empty() ? "" : fmt::format("{{{}}}", labels);
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, h.sum, name, braces, h.count);
}

std::string ServeMetrics::prometheus() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out +=
      "# HELP slurm_train_serve_model_info The model served: its kind, file and training step.\n"
      "# TYPE slurm_train_serve_model_info gauge\n";
  out += fmt::format("slurm_train_serve_model_info{{kind=\"{}\",file=\"{}\",step=\"{}\"}} 1\n",
                     prometheus_label_value(kind_), prometheus_label_value(file_), step_);
  out +=
      "# HELP slurm_train_serve_requests_total Requests answered, by path and HTTP status.\n"
      "# TYPE slurm_train_serve_requests_total counter\n";
  for (const auto& [key, count] : requests_)
    out +=
        fmt::format("slurm_train_serve_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  out +=
      "# HELP slurm_train_serve_requests_in_flight Requests being answered now.\n"
      "# TYPE slurm_train_serve_requests_in_flight gauge\n";
  out += fmt::format("slurm_train_serve_requests_in_flight {}\n", in_flight_);
  out +=
      "# HELP slurm_train_serve_request_seconds Time from a request routed to its answer, by path.\n"
      "# TYPE slurm_train_serve_request_seconds histogram\n";
  for (const auto& [path, h] : latency_)
    render(out, "slurm_train_serve_request_seconds", fmt::format("path=\"{}\"", path), h, kLatencyBounds);
  out +=
      "# HELP slurm_train_serve_batch_rows Rows of /predict run through the model together.\n"
      "# TYPE slurm_train_serve_batch_rows histogram\n";
  render(out, "slurm_train_serve_batch_rows", "", batches_, kBatchBounds);
  out +=
      "# HELP slurm_train_serve_generated_tokens_total Tokens written by /generate.\n"
      "# TYPE slurm_train_serve_generated_tokens_total counter\n";
  out += fmt::format("slurm_train_serve_generated_tokens_total {}\n", generated_tokens_);
  return out;
}

}  // namespace slurm_train
