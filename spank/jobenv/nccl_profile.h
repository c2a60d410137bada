// NCCL site profiles: a named set of NCCL system-configuration variables (built in: ib, roce,
// tcp, off; or a site file NAME.conf), and the precedence that decides which value a task gets:
//   an explicit --train-nccl option > what the user exported > the profile.
//
// Site file format: one KEY=VALUE a line, '#' starts a comment, blank lines ignored;
//   allow_debug=NCCL_ALGO,NCCL_PROTO   lets the file set these debugging keys.
// Debugging and tuning keys (NCCL_ALGO, NCCL_PROTO, NCCL_DEBUG, ...) change results or speed
// for one experiment; a site-wide profile that sets them silently hurts every job, so they are
// refused unless the file names them in allow_debug.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slurm_train {

struct NcclProfile {
  std::string name;
  std::vector<std::pair<std::string, std::string>> variables;  // in file order
};

inline constexpr std::size_t kMaxProfileFileSize = 64 * 1024;
inline constexpr std::size_t kMaxProfileNameLength = 32;

// Throws InputError unless `name` is 1..32 of [a-z0-9_-] starting with a letter or digit (it
// becomes a file name: no '/', no '..').
void check_profile_name(std::string_view what, std::string_view name);

// ib, roce, tcp, off; std::nullopt for any other name.
std::optional<NcclProfile> builtin_profile(std::string_view name);

// Parses a site profile file's text; `origin` (the path) prefixes every error with its line.
NcclProfile parse_profile(std::string_view name, std::string_view origin, std::string_view text);

// The profile `name`: the site file <profiles_dir>/<name>.conf when profiles_dir is set and the
// file exists (a site may override a built-in), else the built-in. Throws InputError when there
// is neither, or the file is unreadable, malformed, or a symbolic link (never followed).
NcclProfile load_profile(std::string_view name, const std::string& profiles_dir);

// The names a user may choose: built-ins and the site's regular files, sorted.
std::vector<std::string> available_profiles(const std::string& profiles_dir);

struct NcclAssignment {
  std::vector<std::pair<std::string, std::string>> set;  // variables to export
  // Profile keys the user's own exports kept (shown by --train-verbose).
  std::vector<std::string> kept_from_user;
};

// Applies the precedence. `exported` looks a variable up in the task's environment as the user
// launched it. With `explicit_option` (the profile was named by --train-nccl), the profile wins
// over the user's exports; otherwise what the user exported is kept.
NcclAssignment resolve_nccl(const NcclProfile& profile, bool explicit_option,
                            const std::function<std::optional<std::string>(const std::string&)>& exported);

// NCCL_SOCKET_IFNAME ("eth0,ib", "^docker,lo", "=eth0") against the node's interfaces: a
// message naming the node and its interfaces when no interface matches, else std::nullopt.
std::optional<std::string> check_socket_ifname(std::string_view value, const std::string& node,
                                               const std::vector<std::string>& interfaces);

}  // namespace slurm_train
