// A task's facts (job, step, ranks, node list) read from the variables Slurm sets in every task's
// environment. The plugin reads the same facts through Slurm's API; `slurm-train exec` reads them
// here when the plugin did not run, and both derive the rendezvous variables from them with
// rendezvous_variables(): one contract.
#pragma once

#include <cstdint>
#include <string_view>

#include "spank/jobenv/environment.h"
#include "spank/jobenv/rendezvous.h"

namespace slurm_train {

// Throws InputError naming the variable that is missing or not what Slurm writes.
TaskFacts task_facts_from_env(const Environment& env);

// The task count of node `node_id` from SLURM_STEP_TASKS_PER_NODE ("2(x3),1": three nodes of
// two tasks, then one of one). InputError when the text is malformed or has fewer nodes.
std::uint32_t tasks_on_node(std::string_view tasks_per_node, std::uint32_t node_id);

}  // namespace slurm_train
