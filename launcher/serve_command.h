// `slurm-train serve MODEL_OR_CHECKPOINT [--port P] [--host H] [--device auto|cpu|cuda]
// [--threads N] [--token-file F] ...`: an HTTP JSON service of a trained model
// (serve/model_server.h). Under srun it says on which node and port it listens; SIGTERM (Slurm's
// end of a job or step) and SIGINT end it after the requests in flight are answered.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace slurm_train
