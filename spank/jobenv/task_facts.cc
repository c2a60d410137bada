#include "spank/jobenv/task_facts.h"

#include <string>

#include "spank/jobenv/text.h"

namespace slurm_train {

namespace {

// The first of `names` that is set; InputError naming them all when none is.
std::string first_set(const Environment& env, std::initializer_list<const char*> names) {
  std::string tried;
  for (const char* name : names) {
    const std::string value = env_value(env, name);
    if (!value.empty()) return value;
    tried += (tried.empty() ? "" : " nor ") + std::string(name);
  }
  throw InputError(tried + " is set: this is not a task of a Slurm job step (run it under srun)");
}

std::uint32_t id_of(const Environment& env, std::initializer_list<const char*> names, std::uint64_t low = 0) {
  return static_cast<std::uint32_t>(parse_uint(*names.begin(), first_set(env, names), low, 0xffffffffu));
}

}  // namespace

std::uint32_t tasks_on_node(std::string_view text, std::uint32_t node_id) {
  const auto bad = [&](const std::string& why) {
    return InputError("SLURM_STEP_TASKS_PER_NODE " + quote_value(text) + ": " + why +
                      " (expected Slurm's form, such as 2(x3),1)");
  };
  std::uint64_t node = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view entry = text.substr(at, comma - at);
    at = comma + 1;
    const std::size_t paren = entry.find('(');
    const std::uint64_t tasks = parse_uint("SLURM_STEP_TASKS_PER_NODE tasks", entry.substr(0, paren), 0, 1u << 20);
    std::uint64_t repeat = 1;
    if (paren != std::string_view::npos) {
      if (entry.size() < paren + 4 || entry.substr(paren, 2) != "(x" || entry.back() != ')')
        throw bad("'" + std::string(entry) + "' is not N or N(xM)");
      repeat = parse_uint("SLURM_STEP_TASKS_PER_NODE repeat", entry.substr(paren + 2, entry.size() - paren - 3), 1,
                          1u << 20);
    }
    if (node_id < node + repeat) return static_cast<std::uint32_t>(tasks);
    node += repeat;
  }
  throw bad("it lists " + std::to_string(node) + " node(s), and this is node " + std::to_string(node_id));
}

TaskFacts task_facts_from_env(const Environment& env) {
  TaskFacts f;
  f.job_id = id_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  f.step_id = id_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  f.global_rank = id_of(env, {"SLURM_PROCID"});
  f.local_rank = id_of(env, {"SLURM_LOCALID"});
  f.world_size = id_of(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, 1);
  f.node_rank = id_of(env, {"SLURM_NODEID"});
  f.local_world_size =
      tasks_on_node(first_set(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}), f.node_rank);
  f.step_nodelist = first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  if (f.global_rank >= f.world_size)
    throw InputError("SLURM_PROCID " + std::to_string(f.global_rank) + " is not below the step's task count " +
                     std::to_string(f.world_size));
  if (f.local_rank >= f.local_world_size)
    throw InputError("SLURM_LOCALID " + std::to_string(f.local_rank) + " is not below this node's task count " +
                     std::to_string(f.local_world_size));
  return f;
}

}  // namespace slurm_train
