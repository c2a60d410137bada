// Facts about this process that the rank tables and logs print: its host and the CPUs it may run
// on (as Slurm, the plugin or mpirun bound it).
#pragma once

#include <string>

namespace slurm_train {

std::string host_name();
// "0-3,8" (the kernel's list format), or "?" when the affinity cannot be read.
std::string allowed_cpus();

}  // namespace slurm_train
