// Per-step metrics as JSON lines (one object a line, appended), written by rank 0: loss,
// learning rate, gradient norm, samples/s and the time of each phase of the step; and one line
// per evaluation on the test set. Every line names its run ("run": the launcher's job id), and
// train.metrics may hold "{job}", replaced by that id: one file per job, which the job continues
// when it is requeued (Slurm keeps its id) and no other run appends to.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace slurm_train {

struct StepTimes {
  // Seconds. `checkpoint`: the wait before the update for the background writer's copy of the
  // parameters (a checkpoint's stall), apart from the optimizer's own time.
  double data = 0, forward = 0, backward = 0, comm_wait = 0, optimizer = 0, checkpoint = 0;
  double total() const { return data + forward + backward + comm_wait + optimizer + checkpoint; }
};

struct StepMetrics {
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  double loss = 0;
  double accuracy = 0;  // of this step's global batch
  double lr = 0;
  double grad_norm = 0;
  double samples_per_second = 0;
  std::size_t tokens_per_sample = 0;  // a language model's window; 0: a classifier
  StepTimes times;
};

// A rank the launcher named a straggler: its compute time per step over the ranks' median.
struct RankSlowdown {
  int rank = 0;
  std::string host, device;
  double slowdown = 0, compute_seconds = 0, median_seconds = 0;
};

// A rank's GPUs as the launcher read them (launcher/gpu_monitor.h): their mean utilisation, the
// power they draw together, and the sum of their energy counters (absent where one has none).
struct GpuReading {
  double utilization_percent = 0;
  double power_watts = 0;
  std::optional<double> energy_joules;
};

// One rank's reading at an evaluation, gathered to rank 0.
struct RankGpuReading {
  int rank = 0;
  double utilization_percent = 0, power_watts = 0;
};

// The readings gathered to rank 0 (Comm::gather_bytes), one part per rank: two doubles
// (utilisation, power) from a rank with GPUs, nothing from one without. Throws
// std::runtime_error on a part of another size.
std::vector<RankGpuReading> rank_gpu_readings(const std::vector<std::vector<unsigned char>>& parts);

// The GPU energy of a run: every rank's GPUs, from its first step to its last.
struct RunEnergy {
  std::uint64_t steps = 0;
  double joules = 0;
  double per_step = 0;
  double per_unit = 0;  // per token (a language model) or per sample
  std::string unit;     // "token" or "sample"; empty where the units of a step are not known
};

// `configured` with every "{job}" replaced by `job`.
std::string metrics_path_for_job(const std::string& configured, const std::string& job);

class MetricsWriter {
 public:
  // An empty path writes nothing. Opens for appending, so a resumed run continues the file; a
  // missing folder is created. The folder is judged and the file opened as
  // train/io/trusted_folder.h says: UntrustedFolder when another user could change the folder,
  // or the file is another user's (they made it first), every user's to write, or no regular
  // file. `run` goes into every line as "run" ("": no such field).
  explicit MetricsWriter(const std::string& path, const std::string& run = "");
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const StepMetrics& m);
  // One line per evaluation: {"eval": {"epoch", "step", "test_loss", "test_accuracy"}}.
  void write_eval(std::uint64_t epoch, std::uint64_t step, double test_loss, double test_accuracy);
  // {"straggler": {"step", "rank", "host", "device", "slowdown", "compute_s", "median_s"}}.
  void write_straggler(std::uint64_t step, const RankSlowdown& s);
  // {"gpu": {"step", "utilization_percent", "power_watts", "ranks": [{"rank", "utilization_percent",
  // "power_watts"}, ...]}} at an evaluation: rank 0's GPUs (the fields left out when it has none),
  // and every rank's that has GPUs.
  void write_gpu(std::uint64_t step, const std::optional<GpuReading>& rank0, std::span<const RankGpuReading> ranks);
  // {"energy": {"steps", "joules", "joules_per_step", "joules_per_token" or "joules_per_sample"}}
  // (the last left out where the energy has no unit).
  void write_energy(const RunEnergy& e);
  // {"program": {"step", "time" (Unix seconds), NAME: VALUE...}}: what a program under `exec`
  // reported at a step; a value that is not finite is written null.
  void write_program(std::uint64_t step, double unix_time, std::span<const std::pair<std::string, double>> values);

 private:
  void write_line(const std::string& text);

  std::string path_, run_;
  std::FILE* file_ = nullptr;
};

}  // namespace slurm_train
