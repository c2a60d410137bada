// The preemption signals: Slurm sends SIGTERM before it preempts or cancels a job, and the
// signal of `--signal=SIG@SECONDS` before the time limit. The handler only records the signal;
// the training loop reads it at the next step boundary, where every rank agrees through a
// collective to checkpoint and stop (see run_command.cc).
#pragma once

#include <string>
#include <vector>

namespace slurm_train {

// "USR2,TERM", "SIGUSR2", "12": signal numbers. Throws std::invalid_argument naming the entry
// and what is accepted; SIGKILL and SIGSTOP cannot be caught and are refused.
std::vector<int> parse_signal_list(const std::string& list);

// "SIGUSR2" for 12.
std::string signal_name(int signal);

// Installs the handler for each signal (replacing any other), with SA_RESTART so that a signal
// never fails a system call of MPI's or ours.
void install_preemption_handlers(const std::vector<int>& signals);

// The first preemption signal received since start, or 0.
int preemption_signal_received();

}  // namespace slurm_train
