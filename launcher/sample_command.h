// `slurm-train sample CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--top-k K]
// [--seed S]`: text from a GPT checkpoint (a file, or a folder's newest valid one), printed as it
// is generated. On the CPU, with a KV cache (train/models/gpt_sampler.h).
#pragma once

#include <CLI/CLI.hpp>

namespace slurm_train {

void add_sample_command(CLI::App& app, int& exit_code);

}  // namespace slurm_train
