#include "launcher/gpu_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#if defined(SLURM_TRAIN_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace slurm_train {

std::string cuda_version_name(int version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

namespace {

std::string arch_list(const CudaBuild& build) {
  std::vector<std::string> parts;
  for (int a : build.archs) parts.push_back(fmt::format("sm_{}", a));
  if (build.ptx > 0) parts.push_back(fmt::format("compute_{} PTX", build.ptx));
  return fmt::format("{}", fmt::join(parts, ", "));
}

Check driver_check(const NodeGpus& node, const CudaBuild& build) {
  const std::string driver = fmt::format("driver {} (CUDA {})", node.driver.empty() ? "unknown" : node.driver,
                                         node.cuda_driver > 0 ? cuda_version_name(node.cuda_driver) : "unknown");
  if (build.runtime == 0 || node.cuda_driver == 0) return {Verdict::kOk, "GPU driver", driver};
  const std::string needs = cuda_version_name(build.runtime);
  if (node.cuda_driver / 1000 < build.runtime / 1000)
    return {Verdict::kFail, "GPU driver",
            fmt::format("{} is older than the CUDA {} this build needs: every CUDA call fails with "
                        "cudaErrorInsufficientDriver; install a driver for CUDA {} or newer on this node",
                        driver, needs, needs)};
  if (node.cuda_driver < build.runtime)
    return {Verdict::kWarn, "GPU driver",
            fmt::format("{} is older than this build's CUDA {}: it runs by minor-version compatibility, "
                        "without the driver compiling PTX for new GPUs; a driver for CUDA {} lifts that",
                        driver, needs, needs)};
  return {Verdict::kOk, "GPU driver", fmt::format("{}, for this build's CUDA {}", driver, needs)};
}

// A cubin for sm_XY runs on compute capability X.Z for Z >= Y; PTX is compiled by the driver for
// any later GPU.
std::string arch_problem(const GpuFacts& g, const CudaBuild& build, Verdict& verdict) {
  if (build.archs.empty() || g.cc_major == 0) return "";
  const int cc = g.cc_major * 10 + g.cc_minor;
  for (int a : build.archs)
    if (a / 10 == g.cc_major && a % 10 <= g.cc_minor) return "";
  if (build.ptx > 0 && build.ptx <= cc) {
    verdict = std::max(verdict, Verdict::kWarn);
    return fmt::format(
        "compute capability {}.{} has no kernel compiled for it ({}): the driver compiles the PTX at start "
        "(slower first start, no architecture-specific code); rebuild with CUDA_ARCHS including {}",
        g.cc_major, g.cc_minor, arch_list(build), cc);
  }
  verdict = Verdict::kFail;
  return fmt::format(
      "compute capability {}.{} is not among this build's architectures ({}): every kernel fails with \"no "
      "kernel image is available for execution on the device\"; rebuild with CUDA_ARCHS including {}",
      g.cc_major, g.cc_minor, arch_list(build), cc);
}

std::vector<Check> gpu_checks(const GpuFacts& g, const CudaBuild& build) {
  const std::string what = fmt::format("GPU {}", g.index);
  std::vector<Check> problems;
  const auto add = [&](Verdict v, std::string detail) { problems.push_back({v, what, std::move(detail)}); };
  if (g.open_errno != 0) {
    const std::string file = fmt::format("/dev/nvidia{}", g.minor);
    if (g.open_errno == EACCES || g.open_errno == EPERM) {
      add(Verdict::kFail, fmt::format("this process may not open {}: {}: the GPU is not this job's (ask Slurm for "
                                      "it: --gpus or --gres=gpu) or the device files' permissions exclude the user",
                                      file, std::strerror(g.open_errno)));
    } else {
      add(Verdict::kFail, fmt::format("cannot open {}: {}: the driver's device files are missing (nvidia-modprobe; "
                                      "a container needs them passed in)",
                                      file, std::strerror(g.open_errno)));
    }
  }
  Verdict arch = Verdict::kOk;
  if (std::string p = arch_problem(g, build, arch); !p.empty()) add(arch, std::move(p));
  if (g.persistence == 0)
    add(Verdict::kWarn,
        "persistence mode is off: the driver tears the GPU down when no process holds it, and every job start "
        "pays seconds to bring it up (nvidia-smi -pm 1, or run nvidia-persistenced)");
  if (g.mig >= 0 && g.mig_pending >= 0 && g.mig != g.mig_pending)
    add(Verdict::kWarn, fmt::format("MIG mode {} is pending: it takes effect after a GPU reset (nvidia-smi -r)",
                                    g.mig_pending == 1 ? "enabled" : "disabled"));
  if (g.mig == 1 && g.mig_instances.empty())
    add(Verdict::kFail,
        "MIG is enabled with no instance: CUDA sees no usable device here; create instances (nvidia-smi mig "
        "-cgi ... -C) or disable MIG (nvidia-smi -mig 0)");
  if (g.ecc_uncorrected_volatile > 0)
    add(Verdict::kFail, fmt::format("{} uncorrected ECC error(s) since the last reset: results may be wrong; drain "
                                    "the node and reset the GPU (nvidia-smi -r)",
                                    g.ecc_uncorrected_volatile));
  if (g.retired_pages_pending == 1)
    add(Verdict::kFail, "a retired memory page is pending: it is retired at the next GPU reset (nvidia-smi -r)");
  if (g.remapping_failed == 1)
    add(Verdict::kFail,
        "row remapping failed: the GPU has run out of spare memory rows and needs service (drain the node)");
  else if (g.remapped_rows_pending == 1)
    add(Verdict::kFail, "a remapped memory row is pending: it takes effect at the next GPU reset (nvidia-smi -r)");
  if (!problems.empty()) return problems;
  std::string detail = fmt::format("{} {} compute capability {}.{}", g.name, g.uuid, g.cc_major, g.cc_minor);
  if (g.mig == 1) detail += fmt::format(", MIG on: {}", fmt::join(g.mig_instances, " "));
  if (g.ecc_corrected_aggregate > 0) detail += fmt::format(", {} corrected ECC errors", g.ecc_corrected_aggregate);
  return {{Verdict::kOk, what, detail}};
}

}  // namespace

std::vector<Check> check_node_gpus(const NodeGpus& node, const CudaBuild& build) {
  std::vector<Check> checks = {driver_check(node, build)};
  for (const GpuFacts& g : node.gpus)
    for (Check& c : gpu_checks(g, build)) checks.push_back(std::move(c));
  return checks;
}

CudaBuild this_cuda_build() {
  CudaBuild build;
#if defined(SLURM_TRAIN_WITH_CUDA) && defined(SLURM_TRAIN_CUDA_ARCHS)
  build.runtime = CUDART_VERSION;
  build.archs = {SLURM_TRAIN_CUDA_ARCHS};
  build.ptx = SLURM_TRAIN_CUDA_PTX_ARCH;
#endif
  return build;
}

}  // namespace slurm_train
