#include "launcher/gpu_checks.h"

#include <doctest/doctest.h>

#include <cerrno>

#include "launcher/node_gpus.h"

using namespace slurm_train;

namespace {

const CudaBuild kBuild{13000, {80, 90}, 90};

GpuFacts healthy(unsigned index) {
  GpuFacts g;
  g.index = index;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-11111111-2222-3333-4444-55555555555" + std::to_string(index);
  g.cc_major = 9;
  g.cc_minor = 0;
  g.persistence = 1;
  g.mig = 0;
  g.mig_pending = 0;
  g.ecc_uncorrected_volatile = 0;
  g.ecc_corrected_aggregate = 0;
  g.retired_pages_pending = 0;
  g.remapped_rows_pending = 0;
  g.remapping_failed = 0;
  return g;
}

std::vector<Check> checks_of(const GpuFacts& g, int cuda_driver = 13000) {
  return check_node_gpus({"580.65.06", cuda_driver, {g}}, kBuild);
}

}  // namespace

TEST_CASE("gpu checks: a healthy node: the driver for the build's CUDA, one OK line a GPU with its facts") {
  const auto checks = check_node_gpus({"580.65.06", 13000, {healthy(0), healthy(1)}}, kBuild);
  REQUIRE(checks.size() == 3);
  CHECK(format_check(checks[0]) == "OK    GPU driver   driver 580.65.06 (CUDA 13.0), for this build's CUDA 13.0");
  CHECK(checks[1].verdict == Verdict::kOk);
  CHECK(checks[1].what == "GPU 0");
  CHECK(checks[1].detail == "NVIDIA H100 80GB HBM3 GPU-11111111-2222-3333-4444-555555555550 compute capability 9.0");
  CHECK(checks[2].what == "GPU 1");
}

TEST_CASE("gpu checks: a driver of an older CUDA major fails; an older minor warns (minor-version compatibility)") {
  auto checks = checks_of(healthy(0), 12040);
  CHECK(checks[0].verdict == Verdict::kFail);
  CHECK(checks[0].detail ==
        "driver 580.65.06 (CUDA 12.4) is older than the CUDA 13.0 this build needs: every CUDA call fails with "
        "cudaErrorInsufficientDriver; install a driver for CUDA 13.0 or newer on this node");
  checks = check_node_gpus({"580.1", 13000, {}}, CudaBuild{13010, {80, 90}, 90});
  CHECK(checks[0].verdict == Verdict::kWarn);
  CHECK(checks[0].detail.find("minor-version compatibility") != std::string::npos);
  // A build without CUDA judges no driver.
  checks = check_node_gpus({"470.1", 11040, {}}, CudaBuild{});
  CHECK(checks[0].verdict == Verdict::kOk);
}

TEST_CASE("gpu checks: compute capability: a cubin of the same major runs, PTX covers later GPUs, earlier ones fail") {
  GpuFacts g = healthy(0);
  g.cc_major = 8;
  g.cc_minor = 6;  // sm_80's cubin runs on 8.6
  CHECK(checks_of(g)[1].verdict == Verdict::kOk);
  g.cc_major = 10;
  g.cc_minor = 0;  // no cubin: the compute_90 PTX, compiled by the driver
  auto checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kWarn);
  CHECK(checks[1].detail.rfind("compute capability 10.0 has no kernel compiled for it (sm_80, sm_90, compute_90 PTX)",
                               0) == 0);
  g.cc_major = 7;
  g.cc_minor = 0;  // a V100: nothing runs
  checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kFail);
  CHECK(checks[1].detail ==
        "compute capability 7.0 is not among this build's architectures (sm_80, sm_90, compute_90 PTX): every "
        "kernel fails with \"no kernel image is available for execution on the device\"; rebuild with CUDA_ARCHS "
        "including 70");
}

TEST_CASE("gpu checks: a device file this process may not open, or that is missing, fails with the fix") {
  GpuFacts g = healthy(0);
  g.minor = 3;
  g.open_errno = EACCES;
  auto checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kFail);
  CHECK(checks[1].detail.rfind("this process may not open /dev/nvidia3: Permission denied: the GPU is not this job's",
                               0) == 0);
  g.open_errno = ENOENT;
  checks = checks_of(g);
  CHECK(checks[1].detail.rfind("cannot open /dev/nvidia3: No such file or directory: the driver's device files", 0) ==
        0);
}

TEST_CASE("gpu checks: persistence off warns; MIG pending, MIG without instances; MIG instances listed") {
  GpuFacts g = healthy(0);
  g.persistence = 0;
  auto checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kWarn);
  CHECK(checks[1].detail.rfind("persistence mode is off", 0) == 0);

  g = healthy(0);
  g.mig_pending = 1;
  checks = checks_of(g);
  CHECK(checks[1].detail == "MIG mode enabled is pending: it takes effect after a GPU reset (nvidia-smi -r)");

  g = healthy(0);
  g.mig = g.mig_pending = 1;
  checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kFail);
  CHECK(checks[1].detail.rfind("MIG is enabled with no instance", 0) == 0);
  g.mig_instances = {"MIG-aaaa", "MIG-bbbb"};
  checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kOk);
  CHECK(checks[1].detail.find(", MIG on: MIG-aaaa MIG-bbbb") != std::string::npos);
}

TEST_CASE("gpu checks: uncorrected ECC errors, a pending retired page, pending or failed row remapping fail") {
  GpuFacts g = healthy(0);
  g.ecc_uncorrected_volatile = 2;
  g.retired_pages_pending = 1;
  g.remapped_rows_pending = 1;
  auto checks = checks_of(g);
  REQUIRE(checks.size() == 4);
  CHECK(checks[1].detail.rfind("2 uncorrected ECC error(s) since the last reset", 0) == 0);
  CHECK(checks[2].detail.rfind("a retired memory page is pending", 0) == 0);
  CHECK(checks[3].detail.rfind("a remapped memory row is pending", 0) == 0);
  for (std::size_t i = 1; i < 4; ++i) CHECK(checks[i].verdict == Verdict::kFail);
  g = healthy(0);
  g.remapping_failed = 1;
  g.remapped_rows_pending = 1;
  checks = checks_of(g);
  REQUIRE(checks.size() == 2);  // the failure says it all
  CHECK(checks[1].detail.rfind("row remapping failed", 0) == 0);
  // Corrected errors are the ECC doing its work: counted on the OK line.
  g = healthy(0);
  g.ecc_corrected_aggregate = 12;
  checks = checks_of(g);
  CHECK(checks[1].verdict == Verdict::kOk);
  CHECK(checks[1].detail.find(", 12 corrected ECC errors") != std::string::npos);
}

TEST_CASE(
    "gpu checks: a GPU is given by its index, its UUID or a prefix of it; unset: all outside a step, none in one") {
  const std::string uuid = "GPU-1a2b3c4d-0000-1111-2222-333344445555";
  CHECK(gpu_is_given({}, 3, uuid));
  CHECK_FALSE(gpu_is_given({{"SLURM_STEP_ID", "0"}}, 3, uuid));
  CHECK(gpu_is_given({{"CUDA_VISIBLE_DEVICES", "1,3"}}, 3, uuid));
  CHECK_FALSE(gpu_is_given({{"CUDA_VISIBLE_DEVICES", "1,2"}}, 3, uuid));
  CHECK(gpu_is_given({{"CUDA_VISIBLE_DEVICES", "GPU-1a2b"}}, 0, uuid));
  CHECK(gpu_is_given({{"CUDA_VISIBLE_DEVICES", uuid}}, 0, uuid));
  CHECK_FALSE(gpu_is_given({{"CUDA_VISIBLE_DEVICES", "GPU-9"}}, 0, uuid));
  CHECK_FALSE(gpu_is_given({{"CUDA_VISIBLE_DEVICES", ""}}, 0, uuid));
}
