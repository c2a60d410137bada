// Metrics lines name their run, and "{job}" gives every job a file of its own.
#include "train/loop/metrics.h"

#include <pwd.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "train/io/folder_trust.h"

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

TEST_CASE("metrics: every rank's GPU reading, gathered, in one line; rank 0's also on its own") {
  const auto part = [](double util, double power) {
    std::vector<unsigned char> p(2 * sizeof(double));
    std::memcpy(p.data(), &util, sizeof util);
    std::memcpy(p.data() + sizeof util, &power, sizeof power);
    return p;
  };
  // Rank 1 has no GPU and sends nothing.
  const std::vector<RankGpuReading> ranks = rank_gpu_readings({part(87, 412), {}, part(12.5, 80)});
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[1].rank == 2);
  CHECK(ranks[1].utilization_percent == 12.5);
  CHECK(ranks[1].power_watts == 80);
  CHECK_THROWS_WITH_AS(rank_gpu_readings({part(1, 2), {1, 2, 3}}), "rank 1 sent a GPU reading of 3 bytes, expected 16",
                       std::runtime_error);

  const fs::path dir = fs::temp_directory_path() / ("slurm-train-metrics-gpu-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (dir / "m.jsonl").string();
  {
    MetricsWriter w(path, "7");
    w.write_gpu(40, GpuReading{87, 412, std::nullopt}, ranks);
    w.write_gpu(80, std::nullopt, std::vector<RankGpuReading>{ranks[1]});
  }
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  auto j = nlohmann::json::parse(line);
  CHECK(j["run"] == "7");
  CHECK(j["gpu"]["step"] == 40);
  CHECK(j["gpu"]["utilization_percent"] == 87.0);
  CHECK(j["gpu"]["ranks"].size() == 2);
  CHECK(j["gpu"]["ranks"][1]["rank"] == 2);
  CHECK(j["gpu"]["ranks"][1]["power_watts"] == 80.0);
  REQUIRE(std::getline(in, line));
  j = nlohmann::json::parse(line);
  CHECK_FALSE(j["gpu"].contains("utilization_percent"));  // rank 0 has no GPU
  CHECK(j["gpu"]["ranks"][0]["rank"] == 2);
  fs::remove_all(dir);
}

TEST_CASE("metrics: a file another user made first at the job's name is refused, and left as it was" *
          doctest::skip(::geteuid() != 0)) {
  const fs::path dir = fs::temp_directory_path() / ("slurm-train-metrics-other-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "metrics-42.jsonl").string();
  std::ofstream(path) << "{\"run\": \"42\", \"step\": 0, \"loss\": 0.001}\n";
  const passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody);
  REQUIRE(::chown(path.c_str(), nobody->pw_uid, static_cast<gid_t>(-1)) == 0);
  const std::string refusal = "the metrics file '" + path + "' belongs to uid " + std::to_string(nobody->pw_uid) +
                              " (nobody), not to this job's user";
  CHECK_THROWS_WITH_AS(MetricsWriter(path, "42"), doctest::Contains(refusal.c_str()), UntrustedFolder);
  std::ifstream in(path);
  CHECK(std::string((std::istreambuf_iterator<char>(in)), {}) == "{\"run\": \"42\", \"step\": 0, \"loss\": 0.001}\n");
  fs::remove_all(dir);
}
