#include "launcher/node_health.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("node health: scontrol's one-line node records give each node's address and state") {
  const std::string text =
      "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.231.207.11 NodeHostName=node1 State=MIXED "
      "Partitions=debug\n"
      "NodeName=node2 Arch=x86_64 NodeAddr=10.231.207.12 State=IDLE+DRAIN Reason=bad\n"
      "NodeName=gpu-007 State=DOWN*\n"
      "garbage line\n";
  const auto nodes = parse_scontrol_nodes(text);
  REQUIRE(nodes.size() == 3);
  CHECK(nodes.at("node1").addr == "10.231.207.11");
  CHECK(nodes.at("node1").state == "MIXED");
  CHECK(nodes.at("node2").state == "IDLE+DRAIN");
  CHECK(nodes.at("gpu-007").addr == "gpu-007");  // no NodeAddr: the name
}

TEST_CASE("node health: DOWN, DRAIN, FAIL and not responding rule a node out; IDLE, MIXED and ALLOCATED do not") {
  for (const char* ok : {"IDLE", "MIXED", "ALLOCATED", "COMPLETING", "MIXED+COMPLETING"})
    CHECK(unusable_state(ok).empty());
  for (const char* bad : {"DOWN", "DOWN*", "IDLE+DRAIN", "MIXED+DRAIN", "FAIL", "ALLOCATED*", "IDLE+NOT_RESPONDING"})
    CHECK_MESSAGE(!unusable_state(bad).empty(), bad);
  CHECK(unusable_state("MIXED+DRAIN").find("MIXED+DRAIN") != std::string::npos);
}

TEST_CASE("node health: slurmd's port from scontrol show config") {
  CHECK(parse_slurmd_port("SlurmctldPort           = 6957\nSlurmdPort              = 6958\nSlurmdTimeout = 60 sec\n") ==
        6958);
  CHECK(parse_slurmd_port("nothing here\n") == 0);
}

TEST_CASE("node health: doctor --node's last lines say which nodes failed; a node that said nothing did not report") {
  const std::string output =
      "OK   Slurm: job 7, step 3\n"
      "FAIL GPUs: CUDA_VISIBLE_DEVICES is empty\n"
      "node-check node3 FAIL: GPUs: CUDA_VISIBLE_DEVICES is empty\n"
      "0: node-check node1 ok\n"  // as srun --label writes it
      "node-check\n";
  const auto failures = node_check_failures(output, {"node1", "node3", "node4"}, 20);
  REQUIRE(failures.size() == 2);
  CHECK(failures.at("node3") ==
        "its node check (slurm-train doctor --node): FAIL: GPUs: CUDA_VISIBLE_DEVICES is empty");
  CHECK(failures.at("node4") == "its node check (slurm-train doctor --node) did not report within 20 s");
  CHECK(node_check_failures("node-check node1 ok\nnode-check node2 ok\n", {"node1", "node2"}, 5).empty());
}
