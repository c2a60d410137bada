// Slurm hostlist expansion: "gpu-[001-004,010],login1" -> gpu-001 ... gpu-004, gpu-010, login1.
// Pure logic shared by the SPANK plugin (MASTER_ADDR) and the launcher; no Slurm library needed.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace slurm_train {

// Thrown for a malformed hostlist; what() names the hostlist, the position and what was expected.
struct HostlistError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Upper bounds that keep a hostile or mistyped value from exhausting memory.
inline constexpr std::size_t kMaxHostlistLength = 64 * 1024;
inline constexpr std::size_t kMaxHosts = 65536;
inline constexpr std::size_t kMaxHostnameLength = 255;

// Expands a Slurm hostlist in order, keeping the zero padding of each range's lower bound
// ("[08-10]" -> 08 09 10). Several bracket groups in one name multiply ("r[1-2]n[1-2]").
std::vector<std::string> expand_hostlist(std::string_view hostlist);

}  // namespace slurm_train
