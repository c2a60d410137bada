#include "spank/task_env.h"

#include <map>

#include "spank/jobenv/hostlist.h"
#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;
using slurm_train::testing::fixture_sysfs;

namespace {

StepContext dgx_step(BindMode bind, std::uint32_t local_tasks) {
  StepContext step;
  step.settings.bind = bind;
  step.profile = *builtin_profile("tcp");
  step.topology = read_topology(fixture_sysfs("dgx-8gpu-2socket"));
  step.step_cpus = parse_cpulist("cpus", "0-127");
  step.node = "gpu-002";
  step.interfaces = {"lo", "eth0", "ib0"};
  step.job_id = 4242;
  step.step_id = 1;
  step.node_id = 1;
  step.local_tasks = local_tasks;
  step.total_tasks = 2 * local_tasks;
  return step;
}

TaskInput task(std::uint32_t local_id, std::uint32_t global_id, std::map<std::string, std::string> env) {
  TaskInput t;
  t.local_id = local_id;
  t.global_id = global_id;
  t.task_cpus = parse_cpulist("cpus", "0-127");
  t.getenv = [env](const std::string& key) -> std::optional<std::string> {
    auto it = env.find(key);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return t;
}

std::map<std::string, std::string> slurm_env() {
  return {{"SLURM_STEP_GPUS", "0,1,2,3,4,5,6,7"},
          {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
          {"SLURM_GPUS_ON_NODE", "8"},
          {"SLURM_STEP_NODELIST", "gpu-[001-002]"}};
}

std::map<std::string, std::string> as_map(const TaskEnv& env) { return {env.set.begin(), env.set.end()}; }

}  // namespace

TEST_CASE("task env: the whole contract for one task of a 2-node step") {
  TaskEnv env = plan_task_env(dgx_step(BindMode::soft, 8), task(5, 13, slurm_env()));
  auto m = as_map(env);
  CHECK(m["CUDA_VISIBLE_DEVICES"] == "5,4,6,7,0,1,2,3");
  CHECK(m["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID");
  CHECK(m["OMP_NUM_THREADS"] == "16");
  CHECK(m["RANK"] == "13");
  CHECK(m["LOCAL_RANK"] == "5");
  CHECK(m["WORLD_SIZE"] == "16");
  CHECK(m["LOCAL_WORLD_SIZE"] == "8");
  CHECK(m["NODE_RANK"] == "1");
  CHECK(m["MASTER_ADDR"] == "gpu-001");
  CHECK(m["MASTER_PORT"] == std::to_string(master_port(4242, 1, {})));
  CHECK(m["NCCL_IB_DISABLE"] == "1");
  CHECK(m["SLURM_TRAIN_BIND"] == "soft");
  CHECK(m["SLURM_TRAIN_NCCL"] == "tcp");
  CHECK(m["SLURM_TRAIN_GPUS"] == "5,4,6,7,0,1,2,3");
  CHECK(m["SLURM_TRAIN_CPUS"] == "48-63");
  CHECK(env.set_affinity);
  CHECK(format_cpulist(env.cpus) == "48-63");
  CHECK(env.warnings.empty());
  CHECK(env.verbose_line == "host gpu-002 rank 13 local rank 5 GPUs 5,4,6,7,0,1,2,3 CPUs 48-63 bind soft profile tcp");
}

TEST_CASE("task env: the user's exports win over the profile and the thread count") {
  auto env = slurm_env();
  env["NCCL_IB_DISABLE"] = "0";
  env["OMP_NUM_THREADS"] = "3";
  TaskEnv out = plan_task_env(dgx_step(BindMode::soft, 8), task(0, 0, env));
  auto m = as_map(out);
  CHECK(m.count("NCCL_IB_DISABLE") == 0);
  CHECK(m.count("OMP_NUM_THREADS") == 0);
  CHECK(m["NCCL_SOCKET_NTHREADS"] == "4");
  CHECK(out.verbose_line.find("(kept your NCCL_IB_DISABLE)") != std::string::npos);
  StepContext step = dgx_step(BindMode::soft, 8);
  step.settings.nccl_from_option = true;  // --train-nccl=tcp: the option wins
  CHECK(as_map(plan_task_env(step, task(0, 0, env)))["NCCL_IB_DISABLE"] == "1");
}

TEST_CASE("task env: --train-env=off and --train-bind=none") {
  StepContext step = dgx_step(BindMode::none, 8);
  step.settings.env = false;
  auto m = as_map(plan_task_env(step, task(2, 2, slurm_env())));
  for (const char* key : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK",
                          "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"})
    CHECK_MESSAGE(m.count(key) == 0, key);
  CHECK(m["SLURM_TRAIN_ENV"] == "off");
  CHECK(m["SLURM_TRAIN_BIND"] == "none");
  CHECK(m["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID");  // Slurm's numbering, whatever the mode
  auto env = slurm_env();
  env["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST";
  CHECK(as_map(plan_task_env(step, task(2, 2, env))).count("CUDA_DEVICE_ORDER") == 0);
  step.settings.bind = BindMode::soft;  // reordered by the plugin: bus order is required
  CHECK(as_map(plan_task_env(step, task(2, 2, env)))["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID");
}

TEST_CASE("task env: a wrong NCCL_SOCKET_IFNAME gives a warning naming the node and its interfaces") {
  auto env = slurm_env();
  env["NCCL_SOCKET_IFNAME"] = "bond0";
  TaskEnv out = plan_task_env(dgx_step(BindMode::soft, 8), task(0, 0, env));
  REQUIRE(out.warnings.size() == 1);
  CHECK(out.warnings[0] == "NCCL_SOCKET_IFNAME=bond0 matches no interface on gpu-002 (it has: lo, eth0, ib0)");
}

TEST_CASE("task env: malformed Slurm variables are errors, not silent defaults") {
  auto env = slurm_env();
  env["SLURM_STEP_NODELIST"] = "gpu-[001";
  check_refused<HostlistError>([&] { plan_task_env(dgx_step(BindMode::soft, 8), task(0, 0, env)); }, "unclosed '['");
  env = slurm_env();
  env["SLURM_STEP_GPUS"] = "0,one";
  check_refused<InputError>([&] { plan_task_env(dgx_step(BindMode::soft, 8), task(0, 0, env)); },
                            "SLURM_STEP_GPUS GPU index 'one'");
  env = slurm_env();
  env.erase("SLURM_STEP_NODELIST");
  check_refused<InputError>([&] { plan_task_env(dgx_step(BindMode::soft, 8), task(0, 0, env)); },
                            "MASTER_ADDR is unknown");
}
