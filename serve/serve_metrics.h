// What `slurm-train serve` answers on GET /metrics, in Prometheus' text format (0.0.4):
//   slurm_train_serve_requests_total{path, status}      counter
//   slurm_train_serve_request_seconds{path}             histogram: from the request routed to its answer
//   slurm_train_serve_batch_rows                        histogram: rows a /predict batch ran
//   slurm_train_serve_generated_tokens_total            counter: tokens /generate wrote
//   slurm_train_serve_requests_in_flight                gauge
//   slurm_train_serve_model_info{kind, file, step}      1
// The path label is one of the served paths or "other", so that a client cannot create series
// without bound by asking for paths that do not exist. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slurm_train {

class ServeMetrics {
 public:
  ServeMetrics(std::string kind, std::string file, std::uint64_t step);

  // The label a request path is counted under.
  static std::string_view path_label(std::string_view path);

  void request_started();
  // A request answered: its status, and its time since request_started() (seconds < 0: refused
  // before it was routed, as a body over the limit is, and never started: counted, not timed).
  void request_finished(std::string_view path, int status, double seconds);
  void batch(int rows);
  void generated(int tokens);

  std::string prometheus() const;

 private:
  struct Histogram {
    std::vector<std::uint64_t> counts;  // one per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  static void observe(Histogram& h, const std::vector<double>& bounds, double value);
  static void render(std::string& out, std::string_view name, std::string_view labels, const Histogram& h,
                     const std::vector<double>& bounds);

  const std::string kind_, file_;
  const std::uint64_t step_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  Histogram batches_;
  std::int64_t in_flight_ = 0;
  std::uint64_t generated_tokens_ = 0;
};

}  // namespace slurm_train
