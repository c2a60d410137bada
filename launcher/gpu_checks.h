// What `slurm-train doctor` checks on a GPU node, from facts NVML gives (read_node_gpus, in
// gpu_facts.cc) and what this build was compiled for: the driver against the CUDA version the
// build needs, each GPU's compute capability against the architectures compiled in, whether this
// process may open each GPU's device file, persistence mode, MIG, ECC errors, retired pages and
// remapped rows. Pure functions of those facts, each problem one line with its fix.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor_checks.h"

namespace slurm_train {

struct GpuFacts {
  unsigned index = 0;
  std::string name, uuid;
  unsigned minor = 0;  // /dev/nvidia<minor>
  int cc_major = 0, cc_minor = 0;
  int open_errno = 0;                       // opening the device file read-write: 0, or errno
  int persistence = -1;                     // 1 on, 0 off; -1: not reported
  int mig = -1, mig_pending = -1;           // 1 enabled, 0 disabled; -1: no MIG on this GPU
  std::vector<std::string> mig_instances;   // MIG-... UUIDs, when enabled
  long long ecc_uncorrected_volatile = -1;  // since the last reset; -1: no ECC
  long long ecc_corrected_aggregate = -1;   // over the GPU's life
  int retired_pages_pending = -1;
  int remapped_rows_pending = -1, remapping_failed = -1;
};

struct NodeGpus {
  std::string driver;   // "580.65.06"
  int cuda_driver = 0;  // the CUDA version the driver supports, as 13000 for 13.0
  std::vector<GpuFacts> gpus;
};

struct CudaBuild {
  int runtime = 0;         // the CUDA runtime built against, as 13000
  std::vector<int> archs;  // cubins compiled, as 80 and 90 for sm_80 and sm_90
  int ptx = 0;             // the PTX kept for later GPUs, as 90; 0: none
};

// "13.0" from 13000.
std::string cuda_version_name(int version);

// One check for the driver, then per GPU one line: OK with its facts, or each problem with its fix.
std::vector<Check> check_node_gpus(const NodeGpus& node, const CudaBuild& build);

// What this binary was compiled for (CUDA builds; runtime 0 elsewhere).
CudaBuild this_cuda_build();

}  // namespace slurm_train
