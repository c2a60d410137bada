// Metrics lines name their run, and "{job}" gives every job a file of its own.
#include "train/loop/metrics.h"

#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace slurm_train;
namespace fs = std::filesystem;

TEST_CASE("metrics: {job} in train.metrics names one file per job") {
  CHECK(metrics_path_for_job("metrics-{job}.jsonl", "4242") == "metrics-4242.jsonl");
  CHECK(metrics_path_for_job("runs/{job}/m-{job}.jsonl", "7_3") == "runs/7_3/m-7_3.jsonl");
  CHECK(metrics_path_for_job("metrics.jsonl", "4242") == "metrics.jsonl");
  CHECK(metrics_path_for_job("", "4242").empty());
}

TEST_CASE("metrics: every line names its run; a resumed run appends to its file; a missing folder is made") {
  const fs::path dir = fs::temp_directory_path() / ("slurm-train-metrics-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (dir / "sub" / "m.jsonl").string();
  StepMetrics m;
  m.step = 3;
  {
    MetricsWriter w(path, "4242");
    w.write(m);
    w.write_eval(1, 4, 0.5, 0.9);
  }
  {
    MetricsWriter w(path, "4242");  // the requeued job
    m.step = 4;
    w.write(m);
  }
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) CHECK(nlohmann::json::parse(line).at("run") == "4242");
  CHECK(lines == 3);
  {
    MetricsWriter w((dir / "plain.jsonl").string());
    w.write(m);
  }
  std::ifstream plain(dir / "plain.jsonl");
  std::string line;
  std::getline(plain, line);
  CHECK_FALSE(nlohmann::json::parse(line).contains("run"));
  fs::remove_all(dir);
}
