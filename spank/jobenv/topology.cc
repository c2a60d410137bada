#include "spank/jobenv/topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "spank/jobenv/text.h"

namespace slurm_train {
namespace fs = std::filesystem;

namespace {

// sysfs attribute files are one short line; anything longer is not what we expect.
constexpr std::size_t kMaxAttributeSize = 64 * 1024;

bool read_small_file(const fs::path& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  out.assign(kMaxAttributeSize + 1, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<std::size_t>(in.gcount()));
  if (out.size() > kMaxAttributeSize) throw InputError(path.string() + " is larger than expected");
  return true;
}

std::string attribute(const fs::path& path) {
  std::string text;
  if (!read_small_file(path, text)) return {};
  return std::string(trim(text));
}

int parse_numa_node(const fs::path& path) {
  std::string text = attribute(path);
  if (text.empty() || text == "-1") return -1;
  return static_cast<int>(parse_uint(path.string(), text, 0, 4095));
}

bool is_nvidia_gpu(const fs::path& device) {
  if (attribute(device / "vendor") != "0x10de") return false;
  std::string pci_class = attribute(device / "class");
  return pci_class.rfind("0x0300", 0) == 0 || pci_class.rfind("0x0302", 0) == 0;
}

std::vector<fs::path> sorted_entries(const fs::path& folder) {
  std::vector<fs::path> entries;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return entries;
  for (const auto& entry : fs::directory_iterator(folder, ec)) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  return entries;
}

void read_numa(const fs::path& root, Topology& topology) {
  std::vector<std::pair<int, fs::path>> nodes;
  for (const auto& path : sorted_entries(root / "devices/system/node")) {
    std::string name = path.filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 || name.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;
    nodes.emplace_back(static_cast<int>(parse_uint(path.string(), name.substr(4), 0, 4095)), path);
  }
  std::sort(nodes.begin(), nodes.end());
  if (nodes.empty()) return;
  std::size_t count = static_cast<std::size_t>(nodes.back().first) + 1;
  topology.numa_cpus.assign(count, {});
  topology.numa_distance.assign(count, {});
  for (const auto& [id, path] : nodes) {
    topology.numa_cpus[id] = parse_cpulist((path / "cpulist").string(), attribute(path / "cpulist"));
    std::istringstream row(attribute(path / "distance"));
    std::string field;
    while (row >> field)
      topology.numa_distance[id].push_back(static_cast<int>(parse_uint((path / "distance").string(), field, 0, 255)));
  }
}

}  // namespace

Topology read_topology(const std::string& sysfs_root) {
  Topology topology;
  fs::path root(sysfs_root);
  for (const auto& device : sorted_entries(root / "bus/pci/devices")) {
    if (!is_nvidia_gpu(device)) continue;
    GpuInfo gpu;
    gpu.pci_bus_id = device.filename().string();
    check_text(device.string(), gpu.pci_bus_id, 64);
    gpu.numa_node = parse_numa_node(device / "numa_node");
    gpu.local_cpus = parse_cpulist((device / "local_cpulist").string(), attribute(device / "local_cpulist"));
    topology.gpus.push_back(std::move(gpu));
  }
  read_numa(root, topology);
  return topology;
}

int numa_distance(const Topology& topology, int a, int b) {
  if (a >= 0 && b >= 0 && static_cast<std::size_t>(a) < topology.numa_distance.size()) {
    const auto& row = topology.numa_distance[a];
    if (static_cast<std::size_t>(b) < row.size()) return row[b];
  }
  return a == b ? 10 : 20;
}

}  // namespace slurm_train
