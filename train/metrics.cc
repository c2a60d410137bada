#include "train/metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw std::runtime_error(fmt::format("cannot open the metrics file '{}': {}", path, std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write_line(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw std::runtime_error(fmt::format("cannot write the metrics file '{}': {}", path_, std::strerror(errno)));
}

void MetricsWriter::write_eval(std::uint64_t epoch, std::uint64_t step, double test_loss, double test_accuracy) {
  if (!file_) return;
  const nlohmann::json line = {
      {"eval", {{"epoch", epoch}, {"step", step}, {"test_loss", test_loss}, {"test_accuracy", test_accuracy}}}};
  write_line(line.dump() + "\n");
}

void MetricsWriter::write(const StepMetrics& m) {
  if (!file_) return;
  const nlohmann::json line = {
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
        {"optimizer", m.times.optimizer}}},
  };
  write_line(line.dump() + "\n");
}

}  // namespace slurm_train
