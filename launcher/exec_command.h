// `slurm-train exec [OPTIONS] -- PROGRAM [ARGS...]`: the launcher's supervision for any training
// program (a PyTorch or JAX script, an MPI or NCCL program). One supervisor per Slurm task starts
// PROGRAM with the rendezvous variables, and through the watchdog's control connection to task 0
// ends the whole job when one rank's program dies or hangs, forwards Slurm's preemption signal
// and requeues the job, and writes every rank's output to its log. It never calls MPI.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace slurm_train {

// `slurm-train exec [OPTIONS] -- PROGRAM [ARGS...]`: what follows the first `--` is the
// program's, never parsed as exec's options.
struct ExecCommandLine {
  bool separator = false;            // `--` was given
  std::vector<std::string> program;  // what follows it
};

// For `slurm-train exec ...` (or `command`'s): takes `-- PROGRAM...` off the end (argc shrinks to
// what the command line parser should see). Any other command line is left as it is.
ExecCommandLine split_exec_command_line(int& argc, char** argv, const char* command = "exec");

void add_exec_command(CLI::App& app, int& exit_code, const ExecCommandLine& line);

}  // namespace slurm_train
