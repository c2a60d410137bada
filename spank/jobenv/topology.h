// The GPU topology of one node as sysfs describes it: each NVIDIA GPU's PCI bus id, NUMA node and
// local CPUs, and the NUMA distance table. Read from a sysfs root given as an argument ("/sys" in
// production, a fixture tree in tests), so that the binding logic is tested on real layouts.
#pragma once

#include <string>
#include <vector>

#include "spank/jobenv/cpuset.h"

namespace slurm_train {

struct GpuInfo {
  std::string pci_bus_id;  // "0000:07:00.0", lower case as sysfs writes it
  int numa_node = -1;      // -1: the firmware did not say
  CpuSet local_cpus;       // empty: unknown
};

struct Topology {
  // In PCI bus order: the order CUDA uses under CUDA_DEVICE_ORDER=PCI_BUS_ID and the order in
  // which Slurm (AutoDetect=nvml, or gres.conf listing /dev/nvidiaN by bus) numbers the GPUs.
  std::vector<GpuInfo> gpus;
  // distance[a][b] from node<a>/distance; empty when the node has no NUMA information.
  std::vector<std::vector<int>> numa_distance;
  // cpulist of each NUMA node (index = node id); empty when unknown.
  std::vector<CpuSet> numa_cpus;
};

// Reads <sysfs_root>/bus/pci/devices/* (vendor 0x10de, PCI class display 0x0300xx or 3D
// 0x0302xx; NVSwitch bridges and other NVIDIA functions are not GPUs) and
// <sysfs_root>/devices/system/node/node*/{distance,cpulist}. A missing folder gives an empty
// topology (a node without GPUs or NUMA); a malformed file throws InputError naming it.
Topology read_topology(const std::string& sysfs_root);

// NUMA distance between two nodes; unknown nodes (-1 or beyond the table) count as 10 when equal
// and 20 otherwise, which is what the kernel reports for local and one-hop remote.
int numa_distance(const Topology& topology, int a, int b);

}  // namespace slurm_train
