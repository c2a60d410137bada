// The supervisor of one task of `slurm-train exec` (exec_command.h): it starts the program with
// the rendezvous variables, joins the watchdog's control plane of the job step, ends the program
// when another rank dies or hangs, forwards Slurm's preemption signal and requeues the job, and
// writes the program's output to the rank's log.
#pragma once

#include <string>
#include <vector>

#include "spank/jobenv/environment.h"

namespace slurm_train {

struct ExecOptions {
  // The program and its arguments; the other fields are exec's options (their help: exec_command.cc).
  std::vector<std::string> command;
  std::string log_dir = "slurm-train-logs";
  double hang_timeout = 0;
  double kill_grace = 5;
  std::string preempt_signal;  // empty: forward the signal Slurm sent
  double preempt_grace = 120;
  int max_restarts_without_progress = 3;
  double straggler_threshold = 1.2;  // 0: off
  std::string prometheus;            // each rank's GPU series go to rank_prometheus_path(prometheus, rank); "": none
  std::string metrics;               // rank 0's JSON-lines file of the program's figures ("{job}" replaced); "": none
  std::string tensorboard;  // rank 0's TensorBoard folder of the program's figures ("{job}" replaced); "": none
  std::uint64_t tokens_per_step = 0;   // the whole job's in one step, for joules per token; 0: not given
  std::uint64_t samples_per_step = 0;  // the same for joules per sample
  bool log_dir_given = false;
};

// Supervises options.command as this task (of a Slurm job step, or alone as the one rank) and
// returns exec's exit code (launcher/exit_codes.h); a task whose Slurm variables contradict
// each other is a usage error, named on stderr.
int supervise_exec(const ExecOptions& options, const Environment& env);

}  // namespace slurm_train
