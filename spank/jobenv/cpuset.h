// CPU lists in the kernel's list format ("0-3,8,10-11"): parsed into a sorted set of CPU ids and
// written back in the same compact form. Used for sysfs local_cpulist, node cpulists and the
// CPU sets the plugin reports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace slurm_train {

// Sorted, without duplicates.
using CpuSet = std::vector<int>;

// Highest CPU id accepted: far above any real machine, low enough to bound memory.
inline constexpr int kMaxCpuId = 65535;

// Parses "0-3,8" (blanks around the text ignored; an empty text is the empty set). Throws
// InputError naming `what` for anything else, a range that runs backwards or an id above kMaxCpuId.
CpuSet parse_cpulist(std::string_view what, std::string_view text);

// {0,1,2,3,8} -> "0-3,8"; the empty set -> "".
std::string format_cpulist(const CpuSet& cpus);

// Elements of `a` that are also in `b` (both sorted).
CpuSet intersect(const CpuSet& a, const CpuSet& b);

}  // namespace slurm_train
