// The in-job supervisor's decisions (`slurm-train srun`, srun_command.h), pure: after a step of the
// job ends, whether to start another, on which nodes, and what the record of attempts says.
//
// A step that ends in a node-level cause (a rank lost without a word, a hang, ranks that never
// connected, a node whose slurmd does not answer or that Slurm marks DOWN or DRAIN) leaves its node
// out of the job for good; a spare takes its place. Never restarted: success, a configuration
// error, a preemption (the job requeues itself), a checkpoint folder held by another job, a run
// that gave up. The same cause at the same step twice in a row ends the job (a bug, a divergence,
// an out-of-memory that comes back), as does the last of --restarts restarts.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "launcher/step_outcome.h"

namespace slurm_train {

// One step of the job: a line of <log-dir>/<job>/restarts.jsonl.
struct Attempt {
  int number = 0;  // 0: the job's first step
  std::vector<std::string> nodes;
  double started_unix = 0, ended_unix = 0;  // the step's srun
  double first_step_unix = 0;               // its first training step; 0: none reported
  int exit_code = 0;
  StepCause cause = StepCause::kRunning;
  int rank = -1;                      // at fault, -1: none named
  std::string node;                   // at fault, "": none named
  std::vector<std::string> left_out;  // nodes this step's end left out of the job
  std::uint64_t started_from = 0;     // the step training started from
  std::uint64_t step_reached = 0;     // the step the rank at fault (or rank 0) had reached
  std::int64_t steps_lost = -1;       // step_reached - the next attempt's started_from; -1: not known
  double recovery_seconds = -1;       // from the failure before to this first step; -1: none
  std::string message;
  std::string gpu_fault;  // the node at fault's last Xid or ECC error (gpu_telemetry.h), "" when none
};

struct RestartLimits {
  int restarts = 3;          // restarts inside the job, at most
  bool allow_fewer = false;  // without a spare, go on with fewer nodes (the resume is exact)
  int min_nodes = 1;         // ... but not fewer than this
};

// Whether `cause` is the node's fault: its node is left out of the job.
bool node_level_cause(StepCause cause);

// Why the last attempt's node at fault (Attempt::node) is to be left out, or "" when it is not:
// a node-level cause, an Xid or ECC error on the rank's GPU whatever the cause (a rank that
// failed or hung after one would again on that GPU), or the out-of-memory killer there a second
// time in the job (`before`: the attempts before it).
std::string node_fault(const std::vector<Attempt>& before, const Attempt& last);

// The nodes of a step: `previous`'s healthy nodes first (their caches are warm), then the
// allocation's others in order, none of `left_out`. Fewer than `step_nodes` only with
// --allow-fewer (at least --min-nodes); otherwise `nodes` is empty and `why` says what is missing.
struct NodeChoice {
  std::vector<std::string> nodes;
  std::string why;  // going on with fewer, or why there are too few
};
NodeChoice choose_nodes(const std::vector<std::string>& previous, const std::vector<std::string>& allocation,
                        const std::set<std::string>& left_out, int step_nodes, const RestartLimits& limits);

struct NextStep {
  bool restart = false;
  std::vector<std::string> nodes;  // restart: the new step's, in allocation order where new
  int exit_code = 0;               // !restart: the job's
  std::string why;                 // one sentence for the log
};

// After `attempts` (the last one just ended), with `left_out` every node the job has left out so
// far, on an allocation of `allocation` (in order) whose steps take `step_nodes` nodes.
NextStep next_step(const std::vector<Attempt>& attempts, const std::vector<std::string>& allocation,
                   const std::set<std::string>& left_out, int step_nodes, const RestartLimits& limits);

// Every node that the record's attempts left out (a requeued job keeps them out).
std::set<std::string> nodes_left_out(const std::vector<Attempt>& attempts);

// The record: one JSON object a line. Parsing throws std::invalid_argument naming the line.
std::string format_attempts(const std::vector<Attempt>& attempts);
std::vector<Attempt> parse_attempts(const std::string& text);

}  // namespace slurm_train
