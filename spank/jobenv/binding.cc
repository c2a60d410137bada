#include "spank/jobenv/binding.h"

#include <algorithm>
#include <numeric>

#include "spank/jobenv/text.h"

namespace slurm_train {

std::string_view to_string(BindMode mode) {
  switch (mode) {
    case BindMode::soft:
      return "soft";
    case BindMode::strict:
      return "strict";
    case BindMode::none:
      return "none";
  }
  return "?";
}

std::optional<BindMode> parse_bind_mode(std::string_view text) {
  if (text == "soft") return BindMode::soft;
  if (text == "strict") return BindMode::strict;
  if (text == "none") return BindMode::none;
  return std::nullopt;
}

namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = text.find(sep, start);
    parts.emplace_back(text.substr(start, at == text.npos ? text.npos : at - start));
    if (at == text.npos) return parts;
    start = at + 1;
  }
}

const GpuInfo* gpu_info(const Topology& topology, int node_gpu) {
  if (node_gpu < 0 || static_cast<std::size_t>(node_gpu) >= topology.gpus.size()) return nullptr;
  return &topology.gpus[node_gpu];
}

int numa_of(const Topology& topology, int node_gpu) {
  const GpuInfo* gpu = gpu_info(topology, node_gpu);
  return gpu ? gpu->numa_node : -1;
}

// Positions [first, last) into the NUMA-sorted GPU list that belong to local task `id`.
std::pair<int, int> share_of(int id, int tasks, int gpus) {
  if (tasks <= gpus) return {id * gpus / tasks, (id + 1) * gpus / tasks};
  int only = id * gpus / tasks;
  return {only, only + 1};
}

// Positions into step_gpus, sorted by (NUMA node, node GPU index).
std::vector<int> numa_sorted_positions(const BindingInput& in) {
  std::vector<int> order(in.step_gpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    int na = numa_of(in.topology, in.step_gpus[a]), nb = numa_of(in.topology, in.step_gpus[b]);
    if (na != nb) return na < nb;
    return in.step_gpus[a] < in.step_gpus[b];
  });
  return order;
}

// Positions into step_gpus, in the order task `id` should see them.
std::vector<int> gpu_order_for_task(const BindingInput& in, int id) {
  std::vector<int> sorted = numa_sorted_positions(in);
  int gpus = static_cast<int>(sorted.size());
  auto [first, last] = share_of(id, in.local_task_count, gpus);
  std::vector<int> order(sorted.begin() + first, sorted.begin() + last);
  if (in.mode == BindMode::strict) return order;
  int home = numa_of(in.topology, in.step_gpus[order.front()]);
  std::vector<int> rest;
  for (int i = 0; i < gpus; ++i)
    if (i < first || i >= last) rest.push_back(sorted[i]);
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) {
    int da = numa_distance(in.topology, home, numa_of(in.topology, in.step_gpus[a]));
    int db = numa_distance(in.topology, home, numa_of(in.topology, in.step_gpus[b]));
    if (da != db) return da < db;
    return in.step_gpus[a] < in.step_gpus[b];
  });
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

// CPUs near task `id`'s own GPU: the GPU's local CPUs, else its NUMA node's; empty if unknown.
CpuSet near_cpus(const BindingInput& in, int id) {
  if (in.step_gpus.empty()) return {};
  int own = in.step_gpus[gpu_order_for_task(in, id).front()];
  const GpuInfo* gpu = gpu_info(in.topology, own);
  if (!gpu) return {};
  if (!gpu->local_cpus.empty()) return gpu->local_cpus;
  if (gpu->numa_node >= 0 && static_cast<std::size_t>(gpu->numa_node) < in.topology.numa_cpus.size())
    return in.topology.numa_cpus[gpu->numa_node];
  return {};
}

// Every local task's CPUs are computed the same way on each task, in local id order, so the
// parts are disjoint without any communication: each takes its count from what is left,
// CPUs near its GPU first, then the lowest free ones.
CpuSet split_cpus(const BindingInput& in, const CpuSet& allowed, int local_id) {
  int tasks = in.local_task_count, total = static_cast<int>(allowed.size());
  if (total == 0) return {};
  if (total < tasks) return {allowed[local_id % total]};
  std::vector<bool> taken(allowed.size(), false);
  CpuSet mine;
  for (int id = 0; id <= local_id; ++id) {
    int want = total / tasks + (id < total % tasks ? 1 : 0);
    CpuSet near = near_cpus(in, id);
    CpuSet part;
    for (int pass = 0; pass < 2 && static_cast<int>(part.size()) < want; ++pass)
      for (std::size_t k = 0; k < allowed.size() && static_cast<int>(part.size()) < want; ++k) {
        bool is_near = std::binary_search(near.begin(), near.end(), allowed[k]);
        if (taken[k] || (pass == 0 && !is_near)) continue;
        taken[k] = true;
        part.push_back(allowed[k]);
      }
    std::sort(part.begin(), part.end());
    if (id == local_id) mine = std::move(part);
  }
  return mine;
}

}  // namespace

TaskBinding bind_task(const BindingInput& in, int local_id) {
  TaskBinding out;
  out.cpus = in.task_cpus;
  int tasks = std::max(in.local_task_count, 1);
  local_id = std::clamp(local_id, 0, tasks - 1);
  BindingInput input = in;
  input.local_task_count = tasks;
  int gpus = static_cast<int>(in.step_gpus.size());
  // MIG instances (Slurm's gres/gpu with MIG lists their UUIDs, "MIG-..."): a CUDA process uses
  // one MIG device, and Slurm's indices then count instances, not the GPUs the topology
  // describes. Each task gets its own instance alone, in Slurm's order; its CPUs are split
  // without a GPU's locality.
  const bool mig = std::any_of(in.slurm_visible.begin(), in.slurm_visible.end(),
                               [](const std::string& d) { return is_mig_instance(d); });
  if (mig) {
    input.topology.gpus.clear();
    if (input.mode == BindMode::soft) input.mode = BindMode::strict;
  }

  bool slurm_bound_gpus = gpus > 0 && (in.slurm_visible.size() < in.step_gpus.size() || in.node_gpu_count > gpus);
  if (slurm_bound_gpus && in.mode != BindMode::none)
    out.warnings.push_back(
        "Slurm already bound GPUs per task (--gpus-per-task, --gpu-bind); "
        "CUDA_VISIBLE_DEVICES is left as Slurm set it");
  int node_gpus = std::max(gpus, in.node_gpu_count);
  if (node_gpus > 0 && tasks > node_gpus && in.mode != BindMode::none)
    out.warnings.push_back(std::to_string(tasks) + " tasks share " + std::to_string(node_gpus) +
                           " GPU(s) on this node: more tasks than GPUs");

  bool place_gpus =
      in.mode != BindMode::none && gpus > 0 && !slurm_bound_gpus && in.slurm_visible.size() == in.step_gpus.size();
  if (place_gpus) {
    std::vector<std::string> visible;
    for (int pos : gpu_order_for_task(input, local_id)) {
      visible.push_back(in.slurm_visible[pos]);
      out.node_gpus.push_back(in.step_gpus[pos]);
    }
    out.visible_devices = std::move(visible);
  } else {
    out.node_gpus = in.step_gpus;
  }

  bool slurm_bound_cpus = in.task_cpus != in.step_cpus;
  if (in.mode != BindMode::none && !slurm_bound_cpus) {
    CpuSet allowed = intersect(in.step_cpus, in.task_cpus);
    CpuSet part = split_cpus(input, allowed, local_id);
    if (!part.empty() && part != out.cpus) {
      out.cpus = std::move(part);
      out.cpus_changed = true;
    }
  }
  out.omp_threads = std::max<int>(1, static_cast<int>(out.cpus.size()));
  return out;
}

std::vector<int> parse_gpu_index_list(std::string_view what, std::string_view text) {
  std::vector<int> gpus;
  text = trim(text);
  if (text.empty()) return gpus;
  check_text(what, text, 4096);
  for (const auto& part : split(text, ','))
    gpus.push_back(static_cast<int>(parse_uint(std::string(what) + " GPU index", part, 0, 1023)));
  return gpus;
}

std::vector<std::string> parse_visible_devices(std::string_view text) {
  std::vector<std::string> devices;
  text = trim(text);
  if (text.empty()) return devices;
  check_text("CUDA_VISIBLE_DEVICES", text, 4096);
  for (auto& part : split(text, ',')) {
    check_text("CUDA_VISIBLE_DEVICES entry", part, 128);
    devices.push_back(std::move(part));
  }
  return devices;
}

bool is_mig_instance(std::string_view entry) { return entry.starts_with("MIG-"); }

}  // namespace slurm_train
