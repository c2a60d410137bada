// Facts about this process that the plugin, the rank tables, logs and errors print: its host and
// the CPUs it may run on (as Slurm, the plugin or mpirun bound it). The lowest layer that needs
// them: the plugin, the engine and the launcher all link it.
#pragma once

#include <string>

namespace slurm_train {

std::string host_name();
// "0-3,8" (the kernel's list format), or "?" when the affinity cannot be read.
std::string allowed_cpus();

}  // namespace slurm_train
