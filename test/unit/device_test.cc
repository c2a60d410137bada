// Device choice (train.device) against the probe's findings, without a GPU.
#include "train/steps/device.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "test/unit/test_support.h"
#include "train/config/config.h"

using namespace slurm_train;

TEST_CASE("device: cpu is the CPU, silently, whatever the probe found") {
  for (int devices : {0, 2}) {
    const DeviceChoice d = choose_device("cpu", {devices, devices ? "" : "x", {}});
    CHECK(d.kind == DeviceKind::kCpu);
    CHECK(d.note.empty());
  }
}

TEST_CASE("device: auto without a GPU falls back to the CPU with one short line, not the runtime's error") {
  const std::string reason =
      "cudaGetDeviceCount: cudaErrorInsufficientDriver: CUDA driver version is insufficient "
      "for CUDA runtime version";
  const DeviceChoice d = choose_device("auto", {0, reason, {}});
  CHECK(d.kind == DeviceKind::kCpu);
  CHECK(d.note == "no GPU on this node: training on the CPU");
  CHECK(d.note.find('\n') == std::string::npos);
}

TEST_CASE("device: auto with a GPU is the GPU, silently") {
  const DeviceChoice d = choose_device("auto", {1, "", {"NVIDIA H200"}});
  CHECK(d.kind == DeviceKind::kCuda);
  CHECK(d.note.empty());
}

TEST_CASE("device: cuda is the GPU when there is one, and refused with the reason when there is none") {
  CHECK(choose_device("cuda", {4, "", {}}).kind == DeviceKind::kCuda);
  testing::check_refused<ConfigError>(
      [] {
        choose_device("cuda", {0, "cudaGetDeviceCount: no device", {}});
      },
      "train.device = cuda, but there is no usable GPU: cudaGetDeviceCount: no device");
}

TEST_CASE("device: one GPU per rank: the only one the binding left, the rank's place, or train.gpu") {
  CHECK(gpu_for_rank(-1, 1, 3, 4) == 0);  // --gpus-per-task=1 or the plugin's binding
  CHECK(gpu_for_rank(-1, 4, 3, 4) == 3);  // four visible to each of four ranks
  CHECK(gpu_for_rank(-1, 8, 1, 2) == 1);
  CHECK(gpu_for_rank(2, 4, 0, 1) == 2);
  testing::check_refused<ConfigError>([] { gpu_for_rank(-1, 2, 0, 4); },
                                      "4 ranks on this node and 2 GPU(s) visible to each: ranks would share a GPU");
  testing::check_refused<ConfigError>([] { gpu_for_rank(4, 4, 0, 1); },
                                      "train.gpu = 4: this rank sees 4 GPU(s), numbered 0 to 3");
  testing::check_refused<ConfigError>([] { gpu_for_rank(1, 4, 0, 2); }, "train.gpu = 1 with 2 ranks on this node");
}

TEST_CASE("device: precision is bf16 on the GPU by default; the CPU computes in fp32 and says so when asked for less") {
  CHECK(choose_precision("auto", DeviceKind::kCuda).precision == "bf16");
  CHECK(choose_precision("tf32", DeviceKind::kCuda).precision == "tf32");
  CHECK(choose_precision("auto", DeviceKind::kCpu).precision == "fp32");
  CHECK(choose_precision("auto", DeviceKind::kCpu).note.empty());
  const PrecisionChoice cpu = choose_precision("bf16", DeviceKind::kCpu);
  CHECK(cpu.precision == "fp32");
  CHECK(cpu.note == "train.precision = bf16 applies to the GPU: the CPU trains in fp32");
  testing::check_refused<ConfigError>([] { choose_precision("fp16", DeviceKind::kCuda); },
                                      "train.precision = 'fp16': expected one of: auto, fp32, tf32, bf16");
}

TEST_CASE("device: the plan names the rank's GPU and precision") {
  const CudaProbe two{2, "", {"NVIDIA H200", "NVIDIA H200"}};
  const DevicePlan gpu = plan_device("auto", "auto", -1, two, 1, 2);
  CHECK(gpu.kind == DeviceKind::kCuda);
  CHECK(gpu.gpu == 1);
  CHECK(gpu.name == "cuda:1 (NVIDIA H200, bf16)");
  CHECK(gpu.note.empty());
  const DevicePlan cpu = plan_device("auto", "bf16", -1, {0, "no driver", {}}, 0, 1);
  CHECK(cpu.kind == DeviceKind::kCpu);
  CHECK(cpu.name == "cpu");
  CHECK(cpu.note ==
        "no GPU on this node: training on the CPU\ntrain.precision = bf16 applies to the GPU: the CPU trains in fp32");
  CHECK(plan_device("cuda", "fp32", 1, two, 0, 1).name == "cuda:1 (NVIDIA H200, fp32)");
}

TEST_CASE("device: a MIG instance Slurm gave as CUDA_VISIBLE_DEVICES is named by its UUID") {
  CHECK(mig_instances("").empty());
  CHECK(mig_instances("0,1") == std::vector<std::string>{"", ""});
  CHECK(mig_instances("MIG-5e3f0b2a-1c7d-5a6e-9f40-0123456789ab,GPU-1d2c3b4a-0000-1111-2222-333344445555") ==
        std::vector<std::string>{"MIG-5e3f0b2a-1c7d-5a6e-9f40-0123456789ab", ""});
  CudaProbe one{1, "", {"NVIDIA H100 80GB HBM3 MIG 1g.10gb"}};
  one.mig = mig_instances("MIG-5e3f0b2a-1c7d-5a6e-9f40-0123456789ab");
  const DevicePlan plan = plan_device("auto", "auto", -1, one, 0, 1);
  CHECK(plan.name == "cuda:0 (NVIDIA H100 80GB HBM3 MIG 1g.10gb, MIG-5e3f0b2a-1c7d-5a6e-9f40-0123456789ab, bf16)");
  // A checkpoint written there records the name; another device's run still reads its precision.
  CHECK(device_change(plan.name, "cuda:0 (NVIDIA H200, bf16)").empty());
  CHECK_FALSE(device_change(plan.name, "cpu").empty());
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

TEST_CASE("device: a resume says when the checkpoint comes from another kind of device or precision") {
  CHECK(device_change("cpu", "cpu").empty());
  CHECK(device_change("", "cuda:0 (NVIDIA H200, bf16)").empty());  // a file that does not record it
  CHECK(device_change("cuda:0 (NVIDIA H200, bf16)", "cuda:3 (NVIDIA H200, bf16)").empty());
  CHECK(device_change("cuda:0 (NVIDIA H200, bf16)", "cpu") ==
        "the checkpoint was written on the GPU, cuda:0 (NVIDIA H200, bf16); this run continues on the CPU: the same "
        "state, rounded from here as this device computes");
  CHECK(device_change("cpu", "cuda:1 (NVIDIA H100 80GB HBM3, fp32)").find("continues on the GPU, cuda:1") !=
        std::string::npos);
  CHECK(device_change("cuda:0 (NVIDIA H200, bf16)", "cuda:0 (NVIDIA H200, fp32)").find("written on the GPU") !=
        std::string::npos);
}
