// Per-task GPU and CPU binding: (local task id, the node's task count, the step's GPUs, the
// node's topology, the allowed CPUs, the policy) -> CUDA_VISIBLE_DEVICES order, a CPU set and a
// thread count. Pure: the SPANK plugin gathers the inputs, the launcher can reuse it.
//
// Policies:
//   soft   every task sees every GPU of the step; index 0 is its own GPU, then the rest of its
//          share, then the others by NUMA distance (so cuda:0 is right and NCCL still sees every
//          NVLink peer);
//   strict every task sees only its share: GPUs / tasks of them, nearest first;
//   none   CUDA_VISIBLE_DEVICES and the CPU set are left as Slurm set them.
// MIG instances (CUDA_VISIBLE_DEVICES of "MIG-<uuid>" entries) are bound strictly under soft too,
// one instance a task in Slurm's order: a CUDA process uses one MIG device.
// A task's share: the GPUs sorted by (NUMA node, PCI bus order) and cut into equal consecutive
// parts by local task id; with more tasks than GPUs, tasks share one GPU each.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spank/jobenv/cpuset.h"
#include "spank/jobenv/topology.h"

namespace slurm_train {

enum class BindMode { soft, strict, none };

std::string_view to_string(BindMode mode);
// "soft" | "strict" | "none"; std::nullopt for anything else.
std::optional<BindMode> parse_bind_mode(std::string_view text);

struct BindingInput {
  BindMode mode = BindMode::soft;
  int local_task_count = 1;
  // The step's GPUs on this node as Slurm numbers them (SLURM_STEP_GPUS, else SLURM_JOB_GPUS):
  // index k is the k-th GPU of the node in PCI bus order.
  std::vector<int> step_gpus;
  // This task's CUDA_VISIBLE_DEVICES as Slurm set it. When it lists as many devices as
  // step_gpus, entry k names step_gpus[k] (renumbered from 0 under ConstrainDevices); when it
  // lists fewer, Slurm already bound GPUs per task and they are left alone.
  std::vector<std::string> slurm_visible;
  // SLURM_GPUS_ON_NODE: the step's GPU count on this node (-1: not set). More than step_gpus
  // lists means Slurm gave this task only its own (--gpus-per-task, --gpu-bind).
  int node_gpu_count = -1;
  Topology topology;
  // CPUs the step may use on this node (slurmstepd's affinity) and this task's affinity as it
  // starts. When they differ, Slurm (task/affinity, cgroups) already bound the task: kept.
  CpuSet step_cpus;
  CpuSet task_cpus;
};

struct TaskBinding {
  // CUDA_VISIBLE_DEVICES to set, in order; std::nullopt: leave Slurm's.
  std::optional<std::vector<std::string>> visible_devices;
  // The same GPUs as the node numbers them (SLURM_STEP_GPUS numbering), for logs.
  std::vector<int> node_gpus;
  CpuSet cpus;  // the task's CPU set after binding (never outside task_cpus)
  bool cpus_changed = false;
  int omp_threads = 1;  // |cpus|, at least 1
  // Facts worth one warning per node (only local task 0 needs to print them).
  std::vector<std::string> warnings;
};

// The binding of local task `local_id` (0 <= local_id < local_task_count).
TaskBinding bind_task(const BindingInput& input, int local_id);

// "0,1,3" -> {0,1,3}; InputError naming `what` for anything but GPU indices 0..1023.
std::vector<int> parse_gpu_index_list(std::string_view what, std::string_view text);

// "0,1,GPU-5e3f..." -> its entries (checked for length and characters); "" -> {}.
std::vector<std::string> parse_visible_devices(std::string_view text);

// Whether a CUDA_VISIBLE_DEVICES entry names a MIG instance ("MIG-<uuid>", as Slurm gives them).
bool is_mig_instance(std::string_view entry);

}  // namespace slurm_train
