#include "spank/jobenv/topology.h"

#include <fstream>

#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::fixture_sysfs;

TEST_CASE("topology: 8-GPU 2-socket node: GPUs in bus order, NVSwitches and HCAs left out") {
  Topology t = read_topology(fixture_sysfs("dgx-8gpu-2socket"));
  REQUIRE(t.gpus.size() == 8);
  CHECK(t.gpus[0].pci_bus_id == "0000:07:00.0");
  CHECK(t.gpus[3].pci_bus_id == "0000:4e:00.0");
  CHECK(t.gpus[4].pci_bus_id == "0000:87:00.0");
  CHECK(t.gpus[7].pci_bus_id == "0000:bd:00.0");
  for (int i = 0; i < 8; ++i) CHECK(t.gpus[i].numa_node == (i < 4 ? 0 : 1));
  CHECK(format_cpulist(t.gpus[0].local_cpus) == "0-31,64-95");
  CHECK(format_cpulist(t.gpus[5].local_cpus) == "32-63,96-127");
  REQUIRE(t.numa_cpus.size() == 2);
  CHECK(numa_distance(t, 0, 1) == 21);
  CHECK(numa_distance(t, 1, 1) == 10);
}

TEST_CASE("topology: 4-GPU single-socket node with numa_node -1 and audio functions") {
  Topology t = read_topology(fixture_sysfs("ws-4gpu-1socket"));
  REQUIRE(t.gpus.size() == 4);
  CHECK(t.gpus[1].pci_bus_id == "0000:21:00.0");
  for (const auto& gpu : t.gpus) {
    CHECK(gpu.numa_node == -1);
    CHECK(format_cpulist(gpu.local_cpus) == "0-63");
  }
  CHECK(numa_distance(t, -1, -1) == 10);
  CHECK(numa_distance(t, -1, 0) == 20);
}

TEST_CASE("topology: a root without sysfs gives an empty topology; a bad file is named") {
  Topology empty = read_topology("/nonexistent-sysfs-root");
  CHECK(empty.gpus.empty());
  CHECK(empty.numa_cpus.empty());

  auto root = std::filesystem::temp_directory_path() / "slurm-train-topology-test";
  std::filesystem::remove_all(root);
  auto dev = root / "bus/pci/devices/0000:01:00.0";
  std::filesystem::create_directories(dev);
  auto write = [&](const char* name, const char* text) { std::ofstream(dev / name) << text; };
  write("vendor", "0x10de\n");
  write("class", "0x030200\n");
  write("numa_node", "zero\n");
  write("local_cpulist", "0-3\n");
  slurm_train::testing::check_refused<InputError>([&] { read_topology(root.string()); }, "numa_node 'zero'");
  std::filesystem::remove_all(root);
}
