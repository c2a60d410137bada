#include "spank/jobenv/binding.h"

#include <algorithm>
#include <random>

#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::fixture_sysfs;

namespace {

BindingInput node_input(const std::string& fixture, BindMode mode, int tasks, int gpus, const std::string& cpus) {
  BindingInput in;
  in.mode = mode;
  in.local_task_count = tasks;
  for (int g = 0; g < gpus; ++g) {
    in.step_gpus.push_back(g);
    in.slurm_visible.push_back(std::to_string(g));
  }
  in.node_gpu_count = gpus;
  if (!fixture.empty()) in.topology = read_topology(fixture_sysfs(fixture));
  in.step_cpus = in.task_cpus = parse_cpulist("cpus", cpus);
  return in;
}

std::string visible(const TaskBinding& b) {
  if (!b.visible_devices) return "(unchanged)";
  std::string out;
  for (const auto& d : *b.visible_devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

}  // namespace

TEST_CASE("binding: 8-GPU 2-socket node, 8 tasks, soft: own GPU first, same socket next") {
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::soft, 8, 8, "0-127");
  const char* expected_gpus[] = {"0,1,2,3,4,5,6,7", "1,0,2,3,4,5,6,7", "2,0,1,3,4,5,6,7", "3,0,1,2,4,5,6,7",
                                 "4,5,6,7,0,1,2,3", "5,4,6,7,0,1,2,3", "6,4,5,7,0,1,2,3", "7,4,5,6,0,1,2,3"};
  const char* expected_cpus[] = {"0-15", "16-31", "64-79", "80-95", "32-47", "48-63", "96-111", "112-127"};
  for (int task = 0; task < 8; ++task) {
    CAPTURE(task);
    TaskBinding b = bind_task(in, task);
    CHECK(visible(b) == expected_gpus[task]);
    CHECK(format_cpulist(b.cpus) == expected_cpus[task]);
    CHECK(b.cpus_changed);
    CHECK(b.omp_threads == 16);
    CHECK(b.warnings.empty());
  }
}

TEST_CASE("binding: 8-GPU 2-socket node, strict: each task its share, CPUs of its socket") {
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::strict, 4, 8, "0-127");
  const char* expected_gpus[] = {"0,1", "2,3", "4,5", "6,7"};
  const char* expected_cpus[] = {"0-31", "64-95", "32-63", "96-127"};
  for (int task = 0; task < 4; ++task) {
    CAPTURE(task);
    TaskBinding b = bind_task(in, task);
    CHECK(visible(b) == expected_gpus[task]);
    CHECK(format_cpulist(b.cpus) == expected_cpus[task]);
  }
  in.local_task_count = 2;
  CHECK(visible(bind_task(in, 1)) == "4,5,6,7");
  CHECK(format_cpulist(bind_task(in, 1).cpus) == "32-63,96-127");
  in.mode = BindMode::soft;
  CHECK(visible(bind_task(in, 1)) == "4,5,6,7,0,1,2,3");
}

TEST_CASE("binding: a step with two GPUs of the second socket, renumbered by ConstrainDevices") {
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::soft, 2, 0, "0-127");
  in.step_gpus = {4, 6};
  in.slurm_visible = {"0", "1"};
  in.node_gpu_count = 2;
  TaskBinding t0 = bind_task(in, 0), t1 = bind_task(in, 1);
  CHECK(visible(t0) == "0,1");
  CHECK(visible(t1) == "1,0");
  CHECK(t1.node_gpus == std::vector<int>{6, 4});
  // Both GPUs sit on socket 1: task 0 takes its 64 CPUs there, task 1 the rest.
  CHECK(format_cpulist(t0.cpus) == "32-63,96-127");
  CHECK(format_cpulist(t1.cpus) == "0-31,64-95");
}

TEST_CASE("binding: GPUs on both sockets: each task's CPUs follow its GPU") {
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::strict, 2, 0, "0-127");
  in.step_gpus = {3, 4};
  in.slurm_visible = {"3", "4"};
  CHECK(visible(bind_task(in, 0)) == "3");
  CHECK(format_cpulist(bind_task(in, 0).cpus) == "0-31,64-95");
  CHECK(visible(bind_task(in, 1)) == "4");
  CHECK(format_cpulist(bind_task(in, 1).cpus) == "32-63,96-127");
}

TEST_CASE("binding: 4-GPU single-socket node (numa_node -1)") {
  BindingInput in = node_input("ws-4gpu-1socket", BindMode::soft, 4, 4, "0-63");
  const char* expected_gpus[] = {"0,1,2,3", "1,0,2,3", "2,0,1,3", "3,0,1,2"};
  for (int task = 0; task < 4; ++task) {
    CAPTURE(task);
    TaskBinding b = bind_task(in, task);
    CHECK(visible(b) == expected_gpus[task]);
    CHECK(format_cpulist(b.cpus) == std::to_string(task * 16) + "-" + std::to_string(task * 16 + 15));
  }
  in.mode = BindMode::strict;
  CHECK(visible(bind_task(in, 3)) == "3");
}

TEST_CASE("binding: MIG instances: each task its own alone, in Slurm's order, CPUs without GPU locality") {
  // Four MIG instances of an 8-GPU node's first two GPUs (both on socket 0): Slurm's indices
  // count the instances, so the topology's GPUs must not place them or their tasks' CPUs.
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::soft, 4, 4, "0-127");
  in.slurm_visible = {"MIG-5e3f0b2a-1c7d-5a6e-9f40-0123456789ab", "MIG-6f4a1c3b-2d8e-5b7f-8a51-123456789abc",
                      "MIG-7a5b2d4c-3e9f-5c80-9b62-23456789abcd", "MIG-8b6c3e5d-4f0a-5d91-8c73-3456789abcde"};
  for (int task = 0; task < 4; ++task) {
    CAPTURE(task);
    TaskBinding b = bind_task(in, task);
    CHECK(visible(b) == in.slurm_visible[task]);
    CHECK(b.node_gpus == std::vector<int>{task});
    CHECK(format_cpulist(b.cpus) == std::to_string(task * 32) + "-" + std::to_string(task * 32 + 31));
    CHECK(b.warnings.empty());
  }
  in.local_task_count = 8;  // more tasks than instances: they share, one instance each
  CHECK(visible(bind_task(in, 7)) == in.slurm_visible[3]);
  in.mode = BindMode::none;
  CHECK_FALSE(bind_task(in, 1).visible_devices);
}

TEST_CASE("binding: more tasks than GPUs: tasks share, with one warning") {
  BindingInput in = node_input("ws-4gpu-1socket", BindMode::strict, 8, 4, "0-63");
  CHECK(visible(bind_task(in, 3)) == "1");
  CHECK(visible(bind_task(in, 7)) == "3");
  TaskBinding b = bind_task(in, 0);
  REQUIRE(b.warnings.size() == 1);
  CHECK(b.warnings[0] == "8 tasks share 4 GPU(s) on this node: more tasks than GPUs");
  in.mode = BindMode::soft;
  CHECK(visible(bind_task(in, 3)) == "1,0,2,3");
}

TEST_CASE("binding: Slurm already bound GPUs per task: left alone, with a warning") {
  BindingInput in = node_input("ws-4gpu-1socket", BindMode::soft, 4, 0, "0-63");
  in.step_gpus = {2};
  in.slurm_visible = {"2"};
  in.node_gpu_count = 4;  // --gpus-per-task=1: SLURM_STEP_GPUS is the task's own
  TaskBinding b = bind_task(in, 2);
  CHECK_FALSE(b.visible_devices);
  CHECK(b.node_gpus == std::vector<int>{2});
  REQUIRE(b.warnings.size() == 1);
  CHECK(b.warnings[0].find("Slurm already bound GPUs per task") != std::string::npos);
}

TEST_CASE("binding: none leaves GPUs and CPUs as Slurm set them") {
  BindingInput in = node_input("dgx-8gpu-2socket", BindMode::none, 8, 8, "0-127");
  TaskBinding b = bind_task(in, 5);
  CHECK_FALSE(b.visible_devices);
  CHECK_FALSE(b.cpus_changed);
  CHECK(format_cpulist(b.cpus) == "0-127");
  CHECK(b.warnings.empty());
}

TEST_CASE("binding: CPUs Slurm bound per task are kept; no GPUs, no topology: a plain split") {
  BindingInput in = node_input("", BindMode::soft, 2, 0, "0-7");
  in.task_cpus = {2, 3};  // task/affinity gave this task two CPUs already
  TaskBinding kept = bind_task(in, 1);
  CHECK_FALSE(kept.cpus_changed);
  CHECK(kept.cpus == CpuSet{2, 3});
  CHECK(kept.omp_threads == 2);
  in.task_cpus = in.step_cpus;
  CHECK(format_cpulist(bind_task(in, 0).cpus) == "0-3");
  CHECK(format_cpulist(bind_task(in, 1).cpus) == "4-7");
  CHECK_FALSE(bind_task(in, 1).visible_devices);
}

TEST_CASE("binding: the CPU split never widens the allowed set and never overlaps") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    BindingInput in = node_input("dgx-8gpu-2socket", BindMode::soft, 1 + static_cast<int>(rng() % 12), 8, "");
    for (int c = 0; c < 128; ++c)
      if (rng() % 3 == 0) in.step_cpus.push_back(c);
    in.task_cpus = in.step_cpus;
    std::vector<int> seen;
    for (int task = 0; task < in.local_task_count; ++task) {
      TaskBinding b = bind_task(in, task);
      for (int c : b.cpus) CHECK(std::binary_search(in.step_cpus.begin(), in.step_cpus.end(), c));
      seen.insert(seen.end(), b.cpus.begin(), b.cpus.end());
    }
    std::sort(seen.begin(), seen.end());
    bool enough = in.step_cpus.size() >= static_cast<std::size_t>(in.local_task_count);
    if (enough) CHECK(seen == in.step_cpus);  // a partition: every CPU used once
  }
}

TEST_CASE("binding: GPU lists from Slurm are parsed strictly") {
  CHECK(parse_gpu_index_list("SLURM_STEP_GPUS", "0,1,3") == std::vector<int>{0, 1, 3});
  CHECK(parse_gpu_index_list("SLURM_STEP_GPUS", "").empty());
  slurm_train::testing::check_refused<InputError>([] { parse_gpu_index_list("SLURM_STEP_GPUS", "0,x"); },
                                                  "SLURM_STEP_GPUS GPU index 'x'");
  CHECK(parse_visible_devices("0,GPU-5e3f") == std::vector<std::string>{"0", "GPU-5e3f"});
  slurm_train::testing::check_refused<InputError>([] { parse_visible_devices("0,\n1"); }, "newline");
  CHECK(parse_bind_mode("strict") == BindMode::strict);
  CHECK_FALSE(parse_bind_mode("Strict"));
}
