// An `exec` job's GPU energy from its ranks' counters: per step from each rank's own window.
#include "launcher/job_energy.h"

#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace slurm_train;
namespace fs = std::filesystem;

TEST_CASE("job energy: each rank's joules over its own steps, summed; per token from the job's tokens a step") {
  // Rank 0 ran 100 steps with 400 J; rank 1 started later and counted 90 steps with 450 J; rank 2
  // has no GPU.
  const std::vector<RankEnergy> ranks = {{0, true, 400.0, 100}, {1, true, 450.0, 90}, {2, false, std::nullopt, 0}};
  const std::optional<RunEnergy> e = job_energy(ranks, 100, 2048, "token");
  REQUIRE(e);
  CHECK(e->steps == 100);
  CHECK(e->joules == doctest::Approx(850));
  CHECK(e->per_step == doctest::Approx(4.0 + 5.0));
  CHECK(e->per_unit == doctest::Approx(9.0 / 2048));
  CHECK(e->unit == "token");

  const std::optional<RunEnergy> plain = job_energy(ranks, 100, 0, "sample");
  REQUIRE(plain);
  CHECK(plain->unit.empty());
  CHECK(plain->per_unit == 0);
}

TEST_CASE("job energy: none where a rank's GPU has no counter, a rank counted no step, or no rank has a GPU") {
  CHECK_FALSE(job_energy(std::vector<RankEnergy>{{0, true, 400.0, 100}, {1, true, std::nullopt, 100}}, 100, 0, ""));
  CHECK_FALSE(job_energy(std::vector<RankEnergy>{{0, true, 400.0, 100}, {1, true, 10.0, 0}}, 100, 0, ""));
  CHECK_FALSE(
      job_energy(std::vector<RankEnergy>{{0, false, std::nullopt, 100}, {1, false, std::nullopt, 100}}, 100, 0, ""));
  CHECK_FALSE(job_energy(std::vector<RankEnergy>{{0, true, 400.0, 100}}, 0, 0, ""));
  // A rank without a GPU does not stop the others' count.
  CHECK(job_energy(std::vector<RankEnergy>{{0, false, std::nullopt, 100}, {1, true, 300.0, 100}}, 100, 0, ""));
}

TEST_CASE("job energy: the metrics line leaves the per-unit figure out when the job gave no unit") {
  const fs::path dir = fs::temp_directory_path() / ("slurm-train-job-energy-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (dir / "m.jsonl").string();
  {
    MetricsWriter w(path, "9");
    w.write_energy(*job_energy(std::vector<RankEnergy>{{0, true, 400.0, 100}}, 100, 0, "sample"));
    w.write_energy(*job_energy(std::vector<RankEnergy>{{0, true, 400.0, 100}}, 100, 32, "sample"));
  }
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  auto j = nlohmann::json::parse(line)["energy"];
  CHECK(j["steps"] == 100);
  CHECK(j["joules"] == 400.0);
  CHECK(j["joules_per_step"] == 4.0);
  CHECK(j.size() == 3);
  REQUIRE(std::getline(in, line));
  j = nlohmann::json::parse(line)["energy"];
  CHECK(j["joules_per_sample"] == doctest::Approx(4.0 / 32));
  fs::remove_all(dir);
}
