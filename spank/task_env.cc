#include "spank/task_env.h"

#include "spank/jobenv/binding.h"
#include "spank/jobenv/env_names.h"
#include "spank/jobenv/rendezvous.h"
#include "spank/jobenv/text.h"

#ifndef SLURM_TRAIN_VERSION
#define SLURM_TRAIN_VERSION "unknown"
#endif

namespace slurm_train {

namespace {

template <typename T>
std::string join(const std::vector<T>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ',';
    if constexpr (std::is_same_v<T, std::string>)
      out += item;
    else
      out += std::to_string(item);
  }
  return out;
}

std::string slurm_value(const EnvLookup& getenv, const std::string& name) {
  auto value = getenv(name);
  return value ? *value : std::string();
}

}  // namespace

TaskEnv plan_task_env(const StepContext& step, const TaskInput& task) {
  TaskEnv out;
  const Settings& settings = step.settings;
  auto add = [&](std::string key, std::string value) { out.set.emplace_back(std::move(key), std::move(value)); };

  BindingInput in;
  in.mode = settings.bind;
  in.local_task_count = static_cast<int>(step.local_tasks);
  std::string gpus_var = task.getenv("SLURM_STEP_GPUS") ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
  in.step_gpus = parse_gpu_index_list(gpus_var, slurm_value(task.getenv, gpus_var));
  in.slurm_visible = parse_visible_devices(slurm_value(task.getenv, "CUDA_VISIBLE_DEVICES"));
  if (auto count = task.getenv("SLURM_GPUS_ON_NODE"))
    in.node_gpu_count = static_cast<int>(parse_uint("SLURM_GPUS_ON_NODE", *count, 0, 1024));
  in.topology = step.topology;
  in.step_cpus = step.step_cpus;
  in.task_cpus = task.task_cpus;
  TaskBinding binding = bind_task(in, static_cast<int>(task.local_id));
  out.warnings = binding.warnings;

  if (binding.visible_devices) add("CUDA_VISIBLE_DEVICES", join(*binding.visible_devices));
  // Slurm's GPU indices follow PCI bus order; CUDA's default (fastest first) may not. The
  // user's own choice is kept unless the plugin reordered the devices itself.
  if (!in.step_gpus.empty() && (binding.visible_devices || !task.getenv("CUDA_DEVICE_ORDER")))
    add("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  out.cpus = binding.cpus;
  out.set_affinity = binding.cpus_changed;
  if (settings.bind != BindMode::none && !task.getenv("OMP_NUM_THREADS"))
    add("OMP_NUM_THREADS", std::to_string(binding.omp_threads));

  NcclAssignment nccl = resolve_nccl(step.profile, settings.nccl_from_option, task.getenv);
  for (auto& [key, value] : nccl.set) add(key, value);
  std::optional<std::string> ifname = task.getenv("NCCL_SOCKET_IFNAME");
  for (const auto& [key, value] : nccl.set)
    if (key == "NCCL_SOCKET_IFNAME") ifname = value;
  if (ifname)
    if (auto warning = check_socket_ifname(*ifname, step.node, step.interfaces)) out.warnings.push_back(*warning);

  if (settings.env) {
    TaskFacts facts;
    facts.job_id = step.job_id;
    facts.step_id = step.step_id;
    facts.global_rank = task.global_id;
    facts.local_rank = task.local_id;
    facts.world_size = step.total_tasks;
    facts.local_world_size = step.local_tasks;
    facts.node_rank = step.node_id;
    facts.step_nodelist = slurm_value(task.getenv, "SLURM_STEP_NODELIST");
    if (facts.step_nodelist.empty()) facts.step_nodelist = slurm_value(task.getenv, "SLURM_JOB_NODELIST");
    if (facts.step_nodelist.empty())
      throw InputError("neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set: MASTER_ADDR is unknown");
    for (auto& [key, value] : rendezvous_variables(facts, step.site.ports)) add(key, value);
  }

  add(env_names::kBind, std::string(to_string(settings.bind)));
  add(env_names::kNccl, step.profile.name);
  add(env_names::kEnv, settings.env ? "on" : "off");
  add(env_names::kGpus, join(binding.node_gpus));
  add(env_names::kCpus, format_cpulist(out.cpus));
  add(env_names::kPlugin, SLURM_TRAIN_VERSION);

  std::string visible =
      binding.visible_devices ? join(*binding.visible_devices) : slurm_value(task.getenv, "CUDA_VISIBLE_DEVICES");
  out.verbose_line = "host " + step.node + " rank " + std::to_string(task.global_id) + " local rank " +
                     std::to_string(task.local_id) + " GPUs " + (visible.empty() ? "-" : visible) + " CPUs " +
                     (out.cpus.empty() ? "-" : format_cpulist(out.cpus)) + " bind " +
                     std::string(to_string(settings.bind)) + " profile " + step.profile.name;
  if (!nccl.kept_from_user.empty()) out.verbose_line += " (kept your " + join(nccl.kept_from_user) + ")";
  return out;
}

}  // namespace slurm_train
