// The start of every program that reads checkpoints or datasets from outside (slurm-train, the
// checkpoint benchmark): such a program runs the first pass of each read in a fresh process of
// its own binary (crash_contained.h), started as `PROGRAM --contained-read ...`.
#pragma once

#include <optional>

namespace slurm_train {

// In a process started for a contained read: runs it and returns its exit status. Otherwise
// sets this program (/proc/self/exe) as the one to start and returns nullopt.
std::optional<int> contained_reads_main(int argc, char** argv);

}  // namespace slurm_train
