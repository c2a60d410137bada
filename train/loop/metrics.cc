#include "train/loop/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "train/io/trusted_folder.h"

namespace slurm_train {

std::string metrics_path_for_job(const std::string& configured, const std::string& job) {
  std::string path = configured;
  for (auto at = path.find("{job}"); at != std::string::npos; at = path.find("{job}", at + job.size()))
    path.replace(at, 5, job);
  return path;
}

MetricsWriter::MetricsWriter(const std::string& path, const std::string& run) : path_(path), run_(run) {
  if (path.empty()) return;
  // What the job's user later reads and plots: a folder others could change, or a file another
  // user made first (its lines would be theirs), is refused.
  const std::filesystem::path p(path);
  const std::string folder = p.parent_path().empty() ? std::string(".") : p.parent_path().string();
  const int fd = TrustedFolder("the metrics folder", folder, true).open_append(p.filename(), "the metrics file");
  file_ = ::fdopen(fd, "a");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot open the metrics file '{}': fdopen: {}", path, std::strerror(err)));
  }
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

std::vector<RankGpuReading> rank_gpu_readings(const std::vector<std::vector<unsigned char>>& parts) {
  std::vector<RankGpuReading> out;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].empty()) continue;
    double values[2];
    if (parts[r].size() != sizeof values)
      throw std::runtime_error(
          fmt::format("rank {} sent a GPU reading of {} bytes, expected {}", r, parts[r].size(), sizeof values));
    std::memcpy(values, parts[r].data(), sizeof values);
    out.push_back({static_cast<int>(r), values[0], values[1]});
  }
  return out;
}

void MetricsWriter::write_line(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw std::runtime_error(fmt::format("cannot write the metrics file '{}': {}", path_, std::strerror(errno)));
}

void MetricsWriter::write_eval(std::uint64_t epoch, std::uint64_t step, double test_loss, double test_accuracy) {
  if (!file_) return;
  nlohmann::json line = {
      {"eval", {{"epoch", epoch}, {"step", step}, {"test_loss", test_loss}, {"test_accuracy", test_accuracy}}}};
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

void MetricsWriter::write_straggler(std::uint64_t step, const RankSlowdown& s) {
  if (!file_) return;
  nlohmann::json line = {{"straggler",
                          {{"step", step},
                           {"rank", s.rank},
                           {"host", s.host},
                           {"device", s.device},
                           {"slowdown", s.slowdown},
                           {"compute_s", s.compute_seconds},
                           {"median_s", s.median_seconds}}}};
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

void MetricsWriter::write_gpu(std::uint64_t step, const std::optional<GpuReading>& rank0,
                              std::span<const RankGpuReading> ranks) {
  if (!file_) return;
  nlohmann::json gpu = {{"step", step}};
  if (rank0) {
    gpu["utilization_percent"] = rank0->utilization_percent;
    gpu["power_watts"] = rank0->power_watts;
  }
  nlohmann::json per_rank = nlohmann::json::array();
  for (const auto& r : ranks)
    per_rank.push_back(
        {{"rank", r.rank}, {"utilization_percent", r.utilization_percent}, {"power_watts", r.power_watts}});
  gpu["ranks"] = std::move(per_rank);
  nlohmann::json line = {{"gpu", std::move(gpu)}};
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

void MetricsWriter::write_energy(const RunEnergy& e) {
  if (!file_) return;
  nlohmann::json energy = {{"steps", e.steps}, {"joules", e.joules}, {"joules_per_step", e.per_step}};
  if (!e.unit.empty()) energy["joules_per_" + e.unit] = e.per_unit;
  nlohmann::json line = {{"energy", std::move(energy)}};
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

void MetricsWriter::write_program(std::uint64_t step, double unix_time,
                                  std::span<const std::pair<std::string, double>> values) {
  if (!file_) return;
  nlohmann::json figures = {{"step", step}, {"time", unix_time}};
  for (const auto& [name, value] : values) figures[name] = value;  // nlohmann writes NaN as null
  nlohmann::json line = {{"program", figures}};
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

void MetricsWriter::write(const StepMetrics& m) {
  if (!file_) return;
  nlohmann::json line = {
      {"step", m.step},
      {"epoch", m.epoch},
      {"loss", m.loss},
      {"accuracy", m.accuracy},
      {"lr", m.lr},
      {"grad_norm", m.grad_norm},
      {"samples_per_s", m.samples_per_second},
      {"time_s",
       {{"data", m.times.data},
        {"forward", m.times.forward},
        {"backward", m.times.backward},
        {"comm_wait", m.times.comm_wait},
        {"optimizer", m.times.optimizer},
        {"checkpoint", m.times.checkpoint}}},
  };
  if (m.tokens_per_sample > 0) line["tokens_per_s"] = m.samples_per_second * static_cast<double>(m.tokens_per_sample);
  if (!run_.empty()) line["run"] = run_;
  write_line(line.dump() + "\n");
}

}  // namespace slurm_train
