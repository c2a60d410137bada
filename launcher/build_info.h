// What this slurm-train binary was built with: printed by --version, so that a bug report
// or a cluster admin can tell which libraries and features a given install has.
#pragma once

#include <string>

namespace slurm_train {

std::string build_info();

}  // namespace slurm_train
