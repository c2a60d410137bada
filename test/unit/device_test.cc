// Device choice (train.device) against the probe's findings, without a GPU.
#include "train/device.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "test/unit/test_support.h"
#include "train/config.h"

using namespace slurm_train;

TEST_CASE("device: cpu is the CPU, silently, whatever the probe found") {
  for (int devices : {0, 2}) {
    const DeviceChoice d = choose_device("cpu", {devices, devices ? "" : "x"});
    CHECK(d.kind == DeviceKind::kCpu);
    CHECK(d.note.empty());
  }
}

TEST_CASE("device: auto without a GPU falls back to the CPU with one short line, not the runtime's error") {
  const std::string reason = "cudaGetDeviceCount: cudaErrorInsufficientDriver: CUDA driver version is insufficient "
                             "for CUDA runtime version";
  const DeviceChoice d = choose_device("auto", {0, reason});
  CHECK(d.kind == DeviceKind::kCpu);
  CHECK(d.note == "no GPU on this node: training on the CPU");
  CHECK(d.note.find('\n') == std::string::npos);
}

TEST_CASE("device: auto with a GPU says the loop still trains on the CPU") {
  const DeviceChoice d = choose_device("auto", {1, ""});
  CHECK(d.kind == DeviceKind::kCpu);
  CHECK(d.note.find("1 CUDA device(s) found") != std::string::npos);
}

TEST_CASE("device: cuda is refused without a GPU (with the reason) and, so far, with one") {
  testing::check_refused<ConfigError>([] { choose_device("cuda", {0, "cudaGetDeviceCount: no device"}); },
                                      "train.device = cuda, but there is no usable GPU: cudaGetDeviceCount: no device");
  testing::check_refused<ConfigError>([] { choose_device("cuda", {4, ""}); }, "runs on the CPU only so far");
}

TEST_CASE("device: an unknown value names itself and the choices") {
  testing::check_refused<ConfigError>([] { choose_device("gpu", {}); },
                                      "train.device = 'gpu': expected one of: auto, cpu, cuda");
  RunConfig c;
  c.train.device = "tpu";
  const auto problems = validate_config(c);
  CHECK(std::find(problems.begin(), problems.end(), "train.device = 'tpu': expected one of: auto, cpu, cuda") !=
        problems.end());
}

TEST_CASE("device: the probe gives a count or a reason, never neither") {
  const CudaProbe p = probe_cuda();
  CHECK((p.devices > 0) == p.problem.empty());
#if !defined(SLURM_TRAIN_WITH_CUDA)
  CHECK(p.problem.find("no CUDA support") != std::string::npos);
#endif
}
