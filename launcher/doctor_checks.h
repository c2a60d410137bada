// What `slurm-train doctor` checks and how it reports: one line per check, OK, WARN or FAIL.
// The checks that need no MPI or files are pure functions of their inputs (the environment as a
// map, a filesystem's magic number), so that they are unit-tested alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "spank/jobenv/environment.h"

namespace slurm_train {

enum class Verdict { kOk, kWarn, kFail };

struct Check {
  Verdict verdict;
  std::string what;    // "Slurm", "plugin", "MPI", ...
  std::string detail;  // one line
};

std::string format_check(const Check& c);
bool any_failed(const std::vector<Check>& checks);

// Inside a job or not; which step; what Slurm gave.
Check check_slurm(const Environment& env);
// The plugin's SLURM_TRAIN_* facts, or their absence (fine: the launcher derives ranks from MPI).
Check check_plugin(const Environment& env);
// The GPUs this process may use (CUDA_VISIBLE_DEVICES as Slurm or the plugin set it).
Check check_gpus(const Environment& env, bool cuda_built);
// The NCCL_* variables; NCCL_SOCKET_IFNAME against this node's interfaces.
Check check_nccl(const Environment& env, const std::string& node, const std::vector<std::string>& interfaces);

// munged, with which `exec`'s supervisors prove to task 0 that they run as the job's user: a
// credential encoded and decoded there. A warning when it fails (`run` does not need it).
Check check_munge(const Environment& env);

// A folder's filesystem by statfs magic: "nfs", "lustre", "gpfs", "beegfs", "ext4", ... or "unknown".
std::string filesystem_name(long magic);
// Shared filesystems on which HDF5's file locking often fails or hangs.
bool locking_is_risky(const std::string& filesystem);
// Writable and on which filesystem; a warning for HDF5 file locking where it matters.
Check check_folder(const std::string& what, const std::string& path, const Environment& env);

}  // namespace slurm_train
