// What the plugin exports to one task: the composition of binding, NCCL profile and rendezvous
// variables from the facts gathered once per node (StepContext) and per task (TaskInput).
// Pure, so that the whole environment contract is unit-tested without Slurm; plugin.cc only
// gathers the inputs and applies the result.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spank/jobenv/cpuset.h"
#include "spank/jobenv/nccl_profile.h"
#include "spank/jobenv/topology.h"
#include "spank/options.h"
#include "spank/site_config.h"

namespace slurm_train {

// Gathered once per node and step (user_init).
struct StepContext {
  SiteConfig site;
  Settings settings;
  NcclProfile profile;
  Topology topology;
  CpuSet step_cpus;                     // slurmstepd's affinity: the step's CPUs on this node
  std::string node;                     // Slurm's name for this node
  std::vector<std::string> interfaces;  // network interfaces of this node
  std::uint32_t job_id = 0, step_id = 0;
  std::uint32_t node_id = 0, local_tasks = 1, total_tasks = 1;
};

// Gathered per task (task_init).
struct TaskInput {
  std::uint32_t local_id = 0, global_id = 0;
  CpuSet task_cpus;  // the task's affinity as it starts
  EnvLookup getenv;  // the task's environment as Slurm prepared it
};

struct TaskEnv {
  std::vector<std::pair<std::string, std::string>> set;  // to export, in this order
  CpuSet cpus;
  bool set_affinity = false;          // cpus narrows the task's affinity
  std::vector<std::string> warnings;  // once per node: printed by local task 0
  std::string verbose_line;           // for --train-verbose
};

// Throws InputError or HostlistError for a malformed Slurm variable.
TaskEnv plan_task_env(const StepContext& step, const TaskInput& task);

}  // namespace slurm_train
