#include "launcher/doctor_checks.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "launcher/munge_auth.h"
#include "spank/jobenv/env_names.h"
#include "spank/jobenv/nccl_profile.h"

namespace slurm_train {

namespace {}  // namespace

std::string format_check(const Check& c) {
  const char* word = c.verdict == Verdict::kOk ? "OK  " : c.verdict == Verdict::kWarn ? "WARN" : "FAIL";
  return fmt::format("{}  {:<12} {}", word, c.what, c.detail);
}

bool any_failed(const std::vector<Check>& checks) {
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) return true;
  return false;
}

Check check_slurm(const Environment& env) {
  const std::string job = env_value(env, "SLURM_JOB_ID");
  if (job.empty())
    return {Verdict::kOk, "Slurm", "not inside a job (a login node or a workstation): submit with slurm-train submit"};
  const std::string step = env_value(env, "SLURM_STEP_ID");
  if (step.empty())
    return {Verdict::kWarn, "Slurm",
            fmt::format("job {} but not a job step: run me with srun to see what each rank gets", job)};
  return {Verdict::kOk, "Slurm",
          fmt::format("job {} step {}: task {} of {} on {} (nodes {})", job, step, env_value(env, "SLURM_PROCID"),
                      env_value(env, "SLURM_NTASKS"), env_value(env, "SLURMD_NODENAME"),
                      env_value(env, "SLURM_STEP_NODELIST"))};
}

Check check_munge(const Environment& env) {
  const std::string socket = munge_socket_for(env);
  const std::string where = socket.empty() ? "munge's default socket" : socket;
  try {
    MungeAuth probe(0, 0, socket, true);
    return {Verdict::kOk, "munge",
            fmt::format("munged at {} vouches for this user (exec's supervisors prove "
                        "themselves to task 0 with it)",
                        where)};
  } catch (const std::exception& e) {
    return {Verdict::kWarn, "munge",
            fmt::format("exec on several tasks cannot start: {} (run does not need munge)", e.what())};
  }
}

Check check_plugin(const Environment& env) {
  const std::string version = env_value(env, env_names::kPlugin);
  if (version.empty()) {
    const bool in_step = !env_value(env, "SLURM_STEP_ID").empty();
    return {in_step ? Verdict::kWarn : Verdict::kOk, "plugin",
            in_step ? "spank_train.so did not set this step's variables (not in plugstack.conf?): ranks come "
                      "from MPI, GPUs as Slurm set them"
                    : "spank_train.so acts inside job steps only"};
  }
  return {Verdict::kOk, "plugin",
          fmt::format("spank_train {}: bind={} nccl={} RANK={} LOCAL_RANK={} MASTER_ADDR={}:{}", version,
                      env_value(env, env_names::kBind), env_value(env, env_names::kNccl),
                      env_value(env, env_names::kRank), env_value(env, env_names::kLocalRank),
                      env_value(env, env_names::kMasterAddr), env_value(env, env_names::kMasterPort))};
}

Check check_gpus(const Environment& env, bool cuda_built) {
  const std::string visible = env_value(env, "CUDA_VISIBLE_DEVICES");
  const bool has_device = std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/nvidia0");
  if (!cuda_built)
    return {Verdict::kOk, "GPUs",
            fmt::format("this build trains on CPUs (OpenBLAS); CUDA_VISIBLE_DEVICES={}",
                        visible.empty() ? "(unset)" : visible)};
  if (!has_device) return {Verdict::kWarn, "GPUs", "no NVIDIA device on this node: training falls back to CPUs"};
  return {Verdict::kOk, "GPUs",
          fmt::format(
              "CUDA_VISIBLE_DEVICES={} order={}", visible.empty() ? "(all)" : visible,
              env_value(env, "CUDA_DEVICE_ORDER").empty() ? "(CUDA's default)" : env_value(env, "CUDA_DEVICE_ORDER"))};
}

Check check_nccl(const Environment& env, const std::string& node, const std::vector<std::string>& interfaces) {
  std::vector<std::string> set;
  for (const auto& [k, v] : env)
    if (k.rfind("NCCL_", 0) == 0) set.push_back(k + "=" + v);
  const std::string ifname = env_value(env, "NCCL_SOCKET_IFNAME");
  if (!ifname.empty()) {
    if (auto problem = check_socket_ifname(ifname, node, interfaces)) return {Verdict::kWarn, "NCCL", *problem};
  }
  if (set.empty())
    return {Verdict::kOk, "NCCL", "no NCCL_* variables (NCCL's defaults; the plugin sets a site profile's)"};
  return {Verdict::kOk, "NCCL", fmt::format("{}", fmt::join(set, " "))};
}

std::string filesystem_name(long magic) {
  switch (static_cast<unsigned long>(magic) & 0xffffffffUL) {
    case 0x6969:
      return "nfs";
    case 0x0bd00bd0:
      return "lustre";
    case 0x47504653:
      return "gpfs";
    case 0x19830326:
      return "beegfs";
    case 0x65735546:
      return "fuse";
    case 0xef53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683e:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794c7630:
      return "overlayfs";
    default:
      return "unknown";
  }
}

bool locking_is_risky(const std::string& fs) {
  return fs == "nfs" || fs == "lustre" || fs == "gpfs" || fs == "beegfs" || fs == "fuse";
}

Check check_folder(const std::string& what, const std::string& path, const Environment& env) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (!std::filesystem::is_directory(p, ec)) return {Verdict::kFail, what, fmt::format("'{}' is not a folder", path)};
  // A real file, not access(): root passes access() everywhere, and NFS root squash lies to it.
  std::string probe = (p / ".slurm-train-doctor-XXXXXX").string();
  const int fd = mkstemp(probe.data());
  if (fd < 0) return {Verdict::kFail, what, fmt::format("'{}' is not writable: {}", p.string(), std::strerror(errno))};
  close(fd);
  unlink(probe.c_str());
  struct statfs info {};
  const std::string fs = statfs(p.c_str(), &info) == 0 ? filesystem_name(static_cast<long>(info.f_type)) : "unknown";
  const std::string locking = env_value(env, "HDF5_USE_FILE_LOCKING");
  if (locking_is_risky(fs) && locking != "FALSE")
    return {
        Verdict::kWarn, what,
        fmt::format("'{}' is writable, on {}: HDF5 file locking often fails there; export HDF5_USE_FILE_LOCKING=FALSE",
                    p.string(), fs)};
  return {Verdict::kOk, what, fmt::format("'{}' is writable ({})", p.string(), fs)};
}

}  // namespace slurm_train
