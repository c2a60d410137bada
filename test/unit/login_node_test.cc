// A GPU run started on a login node, sent to submit.
#include <doctest/doctest.h>

#include <string>

#include "launcher/login_node.h"

using namespace slurm_train;

TEST_CASE("a GPU configuration outside any allocation or launcher, on a machine without a GPU, is sent to submit") {
  RunConfig config;
  config.train.device = "cuda";
  const auto refusal = login_node_refusal(config, {{"PATH", "/usr/bin"}}, "job.toml", 0);
  REQUIRE(refusal);
  CHECK(refusal->find("slurm-train submit job.toml --nodes 1 --gpus-per-node 1") != std::string::npos);
  CHECK(refusal->find("login node") != std::string::npos);
  CHECK_FALSE(login_node_refusal(config, {{"SLURM_JOB_ID", "42"}}, "job.toml", 0));
  CHECK_FALSE(login_node_refusal(config, {{"OMPI_COMM_WORLD_SIZE", "2"}}, "job.toml", 0));
  CHECK_FALSE(login_node_refusal(config, {}, "job.toml", 1));  // a machine with a GPU trains on it
  config.train.device = "auto";
  CHECK_FALSE(login_node_refusal(config, {}, "job.toml", 0));
}
