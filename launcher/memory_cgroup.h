// How many processes the out-of-memory killer has killed in this process's memory cgroup (a
// Slurm step's, under task/cgroup): `exec` reads it before and after its program dies of SIGKILL,
// to say whether that was the OOM killer. cgroup v1 (memory.oom_control) and v2 (memory.events)
// both count "oom_kill N" (Linux 4.13 and later).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace slurm_train {

// The file holding the count, from /proc/self/cgroup's text: the v1 memory controller's line
// ("4:memory:/slurm/uid_0/job_5") first, else the v2 line ("0::/system.slice/x"); nullopt when
// neither names one.
std::optional<std::string> oom_count_file(const std::string& proc_self_cgroup,
                                          const std::string& cgroup_root = "/sys/fs/cgroup");

// The "oom_kill N" line's N; nullopt when there is none.
std::optional<std::uint64_t> parse_oom_kill(const std::string& text);

// This process's count now; nullopt where it cannot be read.
std::optional<std::uint64_t> oom_kills();

}  // namespace slurm_train
