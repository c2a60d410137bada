// Rendezvous variables for frameworks that read them (PyTorch env://, DeepSpeed, Lightning):
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT, from the
// facts Slurm gives a task. MASTER_ADDR is the first host of the step's node list; MASTER_PORT
// is hashed from the job id into the port range and offset by the step id, so that the steps of
// one job (up to the range's size) never share a port.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slurm_train {

struct PortRange {
  std::uint16_t low = 29500;
  std::uint16_t high = 29999;
};

// "LOW-HIGH" with 1024 <= LOW <= HIGH <= 65535; InputError naming `what` otherwise.
PortRange parse_port_range(std::string_view what, std::string_view text);

std::uint16_t master_port(std::uint32_t job_id, std::uint32_t step_id, PortRange range);

// The port of `slurm-train exec`'s control connection (its watchdog), in the same range half of
// it away from MASTER_PORT: never the step's own MASTER_PORT, nor that of the job's next
// (range size / 2 - 1) steps.
std::uint16_t control_port(std::uint32_t job_id, std::uint32_t step_id, PortRange range);

// The first host of a Slurm hostlist ("gpu-[001-004],login1" -> "gpu-001"); HostlistError when
// the list is malformed.
std::string master_addr(std::string_view step_nodelist);

struct TaskFacts {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::uint32_t global_rank = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t world_size = 1;
  std::uint32_t local_world_size = 1;
  std::uint32_t node_rank = 0;
  std::string step_nodelist;
};

// The seven variables, in a fixed order.
std::vector<std::pair<std::string, std::string>> rendezvous_variables(const TaskFacts& facts, PortRange range);

}  // namespace slurm_train
