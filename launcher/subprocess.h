// Runs another program (sbatch, gnuplot) and captures its standard output; its standard error
// goes straight to ours so that the user sees the tool's own message.
#pragma once

#include <string>
#include <vector>

namespace slurm_train {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
};

// argv[0] is looked up on PATH. Throws std::runtime_error naming the program when it cannot be
// started (not installed: the message says which package brings it, when `package` is given).
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& package = "");

}  // namespace slurm_train
