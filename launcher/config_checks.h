// The checks of a training configuration against the files it names, shared by `run` (before
// MPI starts), `run --dry-run` and `doctor --config`.
#pragma once

#include <cstdint>
#include <vector>

#include "launcher/doctor_checks.h"
#include "train/config/config.h"
#include "train/io/memory_budget.h"

namespace slurm_train {

// What every rank checks before MPI starts, from the datasets' metadata and the configuration
// alone (no data is read): the files open and are shaped right, the global batch gives each of
// `ranks` ranks a row, the datasets and the model fit in `memory` with `ranks` ranks sharing the
// global batch, the output files' folders exist, train.device = cuda finds a usable GPU. A
// failure here is a configuration error (exit 2), the same on every rank.
std::vector<Check> check_before_start(const RunConfig& config, std::uint64_t ranks, const MemoryFacts& memory);

// check_before_start, then, when its data checks pass, the datasets read whole (labels in range,
// features finite) and the output folders written to.
std::vector<Check> check_configuration(const RunConfig& config, const Environment& env);

}  // namespace slurm_train
