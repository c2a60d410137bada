// `slurm-train ckpt list DIR | show FILE | verify FILE|DIR`: checkpoints for people and scripts.
// verify exits 1 when any checksum or structure check fails.
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_ckpt_command(CLI::App& app, int& exit_code);

}  // namespace slurm_train
