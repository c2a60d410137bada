// `slurm-train srun [OPTIONS] -- SRUN_ARGS...`: the in-job supervisor. Inside a batch job it runs
// `srun SRUN_ARGS` on the job's nodes but --spare-nodes; when the step fails for a node's fault
// (a rank lost, a hang, a node whose slurmd is gone) it leaves that node out and starts the step
// again on the healthy nodes, a spare in the failed node's place, within the same job; `run`
// resumes from its newest checkpoint. The decisions are restart_policy.h's; each step's outcome
// comes from its rank 0 (step_outcome.h) or, when rank 0 is gone, from srun.
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/exec_command.h"

namespace slurm_train {

void add_srun_command(CLI::App& app, int& exit_code, const ExecCommandLine& line);

}  // namespace slurm_train
