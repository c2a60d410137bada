#include "spank/jobenv/rendezvous.h"

#include "spank/jobenv/env_names.h"
#include "spank/jobenv/hostlist.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

PortRange parse_port_range(std::string_view what, std::string_view text) {
  auto dash = text.find('-');
  if (dash == std::string_view::npos)
    throw InputError(std::string(what) + " " + quote_value(text) + ": expected LOW-HIGH, e.g. 29500-29999");
  auto low = parse_uint(std::string(what) + " low port", text.substr(0, dash), 1024, 65535);
  auto high = parse_uint(std::string(what) + " high port", text.substr(dash + 1), 1024, 65535);
  if (high < low)
    throw InputError(std::string(what) + " " + quote_value(text) + ": the range runs backwards (LOW must be <= HIGH)");
  return {static_cast<std::uint16_t>(low), static_cast<std::uint16_t>(high)};
}

std::uint16_t master_port(std::uint32_t job_id, std::uint32_t step_id, PortRange range) {
  // splitmix64 finaliser: consecutive job ids land far apart in the range.
  std::uint64_t h = job_id + 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  std::uint64_t size = static_cast<std::uint64_t>(range.high) - range.low + 1;
  return static_cast<std::uint16_t>(range.low + (h + step_id) % size);
}

std::uint16_t control_port(std::uint32_t job_id, std::uint32_t step_id, PortRange range) {
  const std::uint32_t size = static_cast<std::uint32_t>(range.high) - range.low + 1;
  return master_port(job_id, step_id + size / 2, range);
}

std::string master_addr(std::string_view step_nodelist) { return expand_hostlist(step_nodelist).front(); }

std::vector<std::pair<std::string, std::string>> rendezvous_variables(const TaskFacts& f, PortRange range) {
  return {
      {env_names::kRank, std::to_string(f.global_rank)},
      {env_names::kLocalRank, std::to_string(f.local_rank)},
      {env_names::kWorldSize, std::to_string(f.world_size)},
      {env_names::kLocalWorldSize, std::to_string(f.local_world_size)},
      {env_names::kNodeRank, std::to_string(f.node_rank)},
      {env_names::kMasterAddr, master_addr(f.step_nodelist)},
      {env_names::kMasterPort, std::to_string(master_port(f.job_id, f.step_id, range))},
  };
}

}  // namespace slurm_train
