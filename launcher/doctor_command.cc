#include "launcher/doctor_command.h"

#include <net/if.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "launcher/allreduce_probe.h"
#include "launcher/allreduce_sweep.h"
#include "launcher/config_checks.h"
#include "launcher/config_options.h"
#include "launcher/doctor_checks.h"
#include "launcher/exit_codes.h"
#include "launcher/mpi_plugin_check.h"
#include "launcher/mpi_session.h"
#include "launcher/node_gpus.h"
#include "spank/jobenv/cpuset.h"
#include "spank/jobenv/host.h"
#include "train/comm/comm.h"

namespace slurm_train {

namespace {

struct DoctorOptions {
  std::shared_ptr<ConfigOptions> config = std::make_shared<ConfigOptions>();
  std::vector<std::string> dirs;
  bool node = false;  // this node's checks alone, without MPI: the in-job supervisor's probe
  bool allreduce = false;
  std::string allreduce_max = "64M";
  AllreduceProbeOptions probe;
};

std::vector<std::string> interfaces() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = if_nameindex()) {
    for (auto* i = list; i->if_index != 0; ++i) names.emplace_back(i->if_name);
    if_freenameindex(list);
  }
  return names;
}

// The checks of this rank, as lines.
std::vector<Check> run_checks(const DoctorOptions& o, const Environment& env, Comm& comm) {
  std::vector<Check> checks = {check_slurm(env), check_plugin(env)};
  double one = 1.0;
  comm.allreduce_sum(&one, 1);
  checks.push_back(
      one == comm.size()
          ? Check{Verdict::kOk, "MPI",
                  fmt::format("{} rank(s), {} on this node; an all-reduce agreed", comm.size(), comm.local_size())}
          : Check{Verdict::kFail, "MPI", fmt::format("an all-reduce of ones gave {} on {} ranks", one, comm.size())});
#ifdef SLURM_TRAIN_WITH_CUDA
  checks.push_back(check_gpus(env, true));
#else
  checks.push_back(check_gpus(env, false));
#endif
  for (Check& c : node_gpu_checks(env)) checks.push_back(std::move(c));
  checks.push_back(check_nccl(env, host_name(), interfaces()));
  checks.push_back(check_munge(env));
  if (!o.config->file.empty() || !o.config->overrides.empty()) {
    try {
      for (Check& c : check_configuration(load_run_config(*o.config, env), env)) checks.push_back(std::move(c));
    } catch (const std::exception& e) {
      checks.push_back({Verdict::kFail, "config", e.what()});
    }
  }
  for (const std::string& dir : o.dirs) checks.push_back(check_folder("folder", dir, env));
  return checks;
}

// This node's checks without MPI, one task a node; the last line is for the in-job supervisor
// (node_health.h): "node-check HOST ok" or "node-check HOST FAIL: WHAT: DETAIL".
int doctor_node(const DoctorOptions& o) {
  const Environment env = current_environment();
#ifdef SLURM_TRAIN_WITH_CUDA
  const bool cuda = true;
#else
  const bool cuda = false;
#endif
  std::vector<Check> checks = {check_slurm(env), check_plugin(env), check_gpus(env, cuda)};
  for (Check& c : node_gpu_checks(env)) checks.push_back(std::move(c));
  checks.push_back(check_nccl(env, host_name(), interfaces()));
  checks.push_back(check_munge(env));
  for (const std::string& dir : o.dirs) checks.push_back(check_folder("folder", dir, env));
  std::string verdict = "ok";
  for (const auto& c : checks) {
    std::cout << format_check(c) << "\n";
    if (c.verdict == Verdict::kFail && verdict == "ok") verdict = fmt::format("FAIL: {}: {}", c.what, c.detail);
  }
  // Slurm's name of the node, which the supervisor knows it by (the host's may be longer).
  const auto slurm_name = env.find("SLURMD_NODENAME");
  std::cout << "node-check " << (slurm_name != env.end() ? slurm_name->second : host_name()) << " " << verdict << "\n"
            << std::flush;
  return any_failed(checks) ? kExitFailed : kExitOk;
}

int doctor(const DoctorOptions& o) {
  if (o.node) return doctor_node(o);
  const Environment env = current_environment();
  // As run does: one line naming the flag, rather than a page of Open MPI's from every task.
  if (const auto missing = missing_mpi_plugin(env)) {
    const auto task = env.find("SLURM_PROCID");
    if (task == env.end() || task->second == "0") std::cerr << "slurm-train: error: " << *missing << "\n";
    return kExitUsage;
  }
  MpiSession mpi(nullptr, nullptr);
  std::unique_ptr<Comm> comm = make_mpi_comm();
  const std::vector<Check> checks = run_checks(o, env, *comm);
  const auto visible = env.find("CUDA_VISIBLE_DEVICES");  // unset: every GPU; empty: none
  // Rank 0 prints its checks and one line per rank; any rank's FAIL is shown and fails the run.
  std::string mine = fmt::format("rank {:>4}  {:<16} local {:>2}  CPUs {:<12} GPUs {}", comm->rank(), host_name(),
                                 comm->local_rank(), allowed_cpus(), visible == env.end() ? "-" : visible->second);
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail && comm->rank() != 0)
      mine += "\n  rank " + std::to_string(comm->rank()) + ": " + format_check(c);
  constexpr std::size_t kLine = 2048;
  mine.resize(kLine, '\0');
  std::vector<char> all(comm->rank() == 0 ? kLine * static_cast<std::size_t>(comm->size()) : kLine);
  // Gather by broadcasting each rank's line in turn: few ranks, and Comm stays small.
  for (int r = 0; r < comm->size(); ++r) {
    std::vector<char> line(mine.begin(), mine.end());
    comm->broadcast(line.data(), kLine, r);
    if (comm->rank() == 0) std::copy(line.begin(), line.end(), all.begin() + static_cast<std::ptrdiff_t>(r * kLine));
  }
  double failed = any_failed(checks) ? 1.0 : 0.0;
  comm->allreduce_sum(&failed, 1);
  if (comm->rank() == 0) {
    for (const auto& c : checks) std::cout << format_check(c) << "\n";
    for (int r = 0; r < comm->size(); ++r) std::cout << std::string(&all[static_cast<std::size_t>(r) * kLine]) << "\n";
    std::cout << (failed > 0 ? fmt::format("doctor: {} rank(s) with a FAIL\n", failed) : "doctor: no FAIL\n")
              << std::flush;
  }
  bool probe_passed = true;
  if (o.allreduce) {
    AllreduceProbeOptions probe = o.probe;
    probe.max_bytes = parse_message_size(o.allreduce_max);
    if (comm->rank() == 0) std::cout << "\n";
    probe_passed = run_allreduce_probe(*comm, probe, std::cout);
  }
  return failed > 0 || !probe_passed ? kExitFailed : kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand("doctor", "check this node, this job and a configuration: OK, WARN or FAIL");
  cmd->add_option("--config,-c", o->config->file, "also check this training configuration (data, output folders)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--dir", o->dirs, "also check that this folder is writable and its filesystem (repeatable)");
  cmd->add_flag("--node", o->node,
                "this node's checks alone, without MPI (one task a node; slurm-train srun's probe before a restart)");
  cmd->add_flag("--allreduce", o->allreduce,
                "then measure all-reduce bandwidth across the job's ranks by message size, as nccl-tests does (NCCL "
                "on GPUs, MPI on CPUs), and time each link of a ring over the nodes, naming the slowest")
      ->excludes("--node");
  cmd->add_option("--allreduce-max", o->allreduce_max, "the largest message of --allreduce: 64M, 1G, 512K, bytes")
      ->capture_default_str()
      ->check([](const std::string& v) {
        try {
          parse_message_size(v);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  cmd->add_option("--allreduce-seconds", o->probe.seconds,
                  "the bound on --allreduce's sweep: it stops before a size that would pass it")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--min-busbw", o->probe.min_busbw,
                  "--allreduce fails (exit 1) when the bus bandwidth at the largest size is below this many GB/s")
      ->check(CLI::NonNegativeNumber);
  add_config_key_options(cmd, o->config);
  cmd->callback([o, cmd, &exit_code] {
    reject_unknown_options(cmd);
    exit_code = doctor(*o);
  });
}

}  // namespace slurm_train
