// Whether a node of the job can take a step: what Slurm says of it (`scontrol show node`: DOWN,
// DRAIN, FAIL, NOT_RESPONDING) and whether its slurmd answers a TCP connection now. The second
// does not wait for SlurmdTimeout (minutes) before a lost node is known: a refused or unanswered
// connection within the probe's timeout is enough to leave the node out.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace slurm_train {

struct NodeFacts {
  std::string name, addr, state;
};

// `scontrol show node --oneliner` output: one node a line. Lines without NodeName= are skipped.
std::map<std::string, NodeFacts> parse_scontrol_nodes(const std::string& text);
// `scontrol show config` output: SlurmdPort, or 0 when it says none.
int parse_slurmd_port(const std::string& text);
// Why Slurm's `state` (IDLE, MIXED+DRAIN, DOWN*, ...) rules the node out, or "" when it does not.
std::string unusable_state(const std::string& state);

// For each of `nodes`, why it cannot take a step ("" when it can): Slurm's state, then a TCP
// connection to its slurmd within `timeout_seconds` (all nodes probed at once). Runs scontrol;
// throws std::runtime_error when it fails.
std::map<std::string, std::string> node_problems(const std::vector<std::string>& nodes, double timeout_seconds);

// What `slurm-train doctor --node` said on each of `nodes` (its lines "node-check HOST ok" and
// "node-check HOST FAIL: WHAT: DETAIL", among others): why each node that failed or did not
// report cannot take a step; nodes that reported ok are absent. `limit_seconds` is for the words.
std::map<std::string, std::string> node_check_failures(const std::string& output, const std::vector<std::string>& nodes,
                                                       double limit_seconds);

}  // namespace slurm_train
