// serve_load: a closed-loop load on an HTTP model service, the one client of bench/serve.sh for
// `slurm-train serve` and its Flask + PyTorch peer (bench/flask_serve.py), so that both are
// measured by the same code at the same concurrency. --connections threads, each with its own
// keep-alive connection (httplib::Client, TCP_NODELAY) to 127.0.0.1:--port, POST the --body file
// to /predict back to back: a new request as soon as the last one is answered, so the load is
// bounded by the connections and the service's own speed sets the rate. Requests that start in
// the --warmup seconds are sent but not counted; of those that start in the next --seconds, each
// one's latency (from before the request is written until its whole answer is read) is recorded.
// Prints one line of key=value pairs:
//   requests_per_s  the counted requests / --seconds
//   p50_ms, p99_ms  the latencies' 50th and 99th percentiles (nearest rank)
//   requests        the counted requests;  errors  non-200 answers and failed connections, all
//                   of them (warm-up included)
// Exit status 1 when there was an error (the first few are described on stderr).
#include <fmt/format.h>
#include <httplib.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct LoadOptions {
  int port = 0;
  std::string body_file;
  int connections = 8;
  double seconds = 5;
  double warmup = 1;
};

struct ConnectionResult {
  std::vector<double> latencies_ms;  // the counted requests'
  long errors = 0;
};

// The latency at quantile q of the sorted values, by nearest rank.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

class ErrorReport {
 public:
  void add(const std::string& what) {
    std::lock_guard lock(mutex_);
    if (++shown_ <= 5) fmt::print(stderr, "serve_load: {}\n", what);
  }

 private:
  std::mutex mutex_;
  int shown_ = 0;
};

ConnectionResult drive_connection(const LoadOptions& o, const std::string& body, Clock::time_point counted_from,
                                  Clock::time_point until, ErrorReport& report) {
  httplib::Client client("127.0.0.1", o.port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  client.set_write_timeout(30);
  ConnectionResult r;
  for (;;) {
    const Clock::time_point start = Clock::now();
    if (start >= until) break;
    const httplib::Result res = client.Post("/predict", body, "application/json");
    const Clock::time_point end = Clock::now();
    if (!res) {
      ++r.errors;
      report.add(fmt::format("no answer: httplib's error {}", httplib::to_string(res.error())));
      continue;
    }
    if (res->status != 200) {
      ++r.errors;
      report.add(fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 200)));
      continue;
    }
    if (start >= counted_from) r.latencies_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  LoadOptions o;
  CLI::App app{"closed-loop POST /predict load on 127.0.0.1:PORT: requests/s and p50/p99 latency", "serve_load"};
  app.add_option("--port", o.port, "the service's port on 127.0.0.1")->required()->check(CLI::Range(1, 65535));
  app.add_option("--body", o.body_file, "file whose bytes are every request's JSON body")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--connections", o.connections, "connections, each a thread sending back to back")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--seconds", o.seconds, "seconds of counted requests")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--warmup", o.warmup, "seconds of requests first, not counted")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(o.body_file, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "serve_load: cannot read {}\n", o.body_file);
    return 1;
  }
  const std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};

  const auto to_duration = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point counted_from = Clock::now() + to_duration(o.warmup);
  const Clock::time_point until = counted_from + to_duration(o.seconds);
  ErrorReport report;
  std::vector<ConnectionResult> results(static_cast<std::size_t>(o.connections));
  std::vector<std::thread> threads;
  for (auto& r : results)
    threads.emplace_back([&, out = &r] { *out = drive_connection(o, body, counted_from, until, report); });
  for (auto& t : threads) t.join();

  std::vector<double> latencies;
  long errors = 0;
  for (const auto& r : results) {
    latencies.insert(latencies.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    errors += r.errors;
  }
  std::sort(latencies.begin(), latencies.end());
  fmt::print("connections={} seconds={} requests_per_s={:.1f} p50_ms={:.3f} p99_ms={:.3f} requests={} errors={}\n",
             o.connections, o.seconds, static_cast<double>(latencies.size()) / o.seconds, percentile(latencies, 0.50),
             percentile(latencies, 0.99), latencies.size(), errors);
  return errors ? 1 : 0;
}
