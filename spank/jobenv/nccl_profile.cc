#include "spank/jobenv/nccl_profile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "spank/jobenv/text.h"

namespace slurm_train {
namespace fs = std::filesystem;

namespace {

// NCCL's debugging and per-experiment tuning variables (NCCL documentation, "Debugging").
constexpr std::string_view kDebugKeys[] = {"NCCL_ALGO",
                                           "NCCL_PROTO",
                                           "NCCL_DEBUG",
                                           "NCCL_DEBUG_FILE",
                                           "NCCL_DEBUG_SUBSYS",
                                           "NCCL_P2P_DISABLE",
                                           "NCCL_SHM_DISABLE",
                                           "NCCL_BUFFSIZE",
                                           "NCCL_NTHREADS",
                                           "NCCL_MAX_NCHANNELS",
                                           "NCCL_MIN_NCHANNELS",
                                           "NCCL_CHECKS_DISABLE",
                                           "NCCL_CHECK_POINTERS",
                                           "NCCL_LAUNCH_MODE",
                                           "NCCL_GRAPH_DUMP_FILE",
                                           "NCCL_GRAPH_FILE",
                                           "NCCL_TOPO_DUMP_FILE",
                                           "NCCL_SET_THREAD_NAME",
                                           "NCCL_P2P_DIRECT_DISABLE",
                                           "NCCL_NET_DISABLE_INTRA",
                                           "NCCL_IGNORE_DISABLED_P2P",
                                           "NCCL_MAX_CTAS"};

bool is_debug_key(std::string_view key) {
  return std::find(std::begin(kDebugKeys), std::end(kDebugKeys), key) != std::end(kDebugKeys);
}

bool is_key_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

void check_key(const std::string& where, std::string_view key) {
  if (key.size() > 64 || key.rfind("NCCL_", 0) != 0 || key.size() == 5 ||
      !std::all_of(key.begin(), key.end(), is_key_char))
    throw InputError(where + ": key " + quote_value(key) +
                     ": expected an NCCL variable name (NCCL_ then A-Z, 0-9, _; at most 64 characters)");
}

// Values are interface lists, HCA lists, numbers, names: no blanks, quotes or shell syntax.
void check_value(const std::string& where, std::string_view key, std::string_view value) {
  check_text(where + ": value of " + std::string(key), value, 256);
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("_.,:=^+/@%-").find(c) != std::string_view::npos;
    if (!ok)
      throw InputError(where + ": value of " + std::string(key) + " " + quote_value(value) + ": character '" +
                       std::string(1, c) + "' not allowed (expected letters, digits and _.,:=^+/@%-)");
  }
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = text.find(',', start);
    items.emplace_back(trim(text.substr(start, comma == text.npos ? text.npos : comma - start)));
    if (comma == text.npos) return items;
    start = comma + 1;
  }
}

// The site file's text, at most kMaxProfileFileSize + 1 bytes (parse_profile refuses more). A
// symbolic link is refused, not followed (O_NOFOLLOW, so nothing can swap one in between a check
// and the open): it could point at any file root may read, and a parse error would show a piece
// of it to the user.
std::string read_profile_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP)
      throw InputError(path.string() + ": a symbolic link (the profiles folder holds regular files only)");
    throw InputError(path.string() + ": cannot be read: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path.string() + ": not a regular file");
  }
  std::string text(kMaxProfileFileSize + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw InputError(path.string() + ": cannot be read: " + std::strerror(error));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(used);
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

void check_profile_name(std::string_view what, std::string_view name) {
  auto ok_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; };
  if (name.empty() || name.size() > kMaxProfileNameLength || !std::all_of(name.begin(), name.end(), ok_char) ||
      name.front() == '-' || name.front() == '_')
    throw InputError(std::string(what) + " " + quote_value(name) +
                     ": expected a profile name (1 to 32 of a-z, 0-9, _ and -, starting with a letter or digit)");
}

std::optional<NcclProfile> builtin_profile(std::string_view name) {
  // System settings only: which transport, and the robustness values large jobs need.
  if (name == "ib")
    return NcclProfile{"ib", {{"NCCL_IB_DISABLE", "0"}, {"NCCL_IB_TIMEOUT", "22"}, {"NCCL_IB_RETRY_CNT", "7"}}};
  if (name == "roce")
    return NcclProfile{
        "roce",
        {{"NCCL_IB_DISABLE", "0"}, {"NCCL_IB_GID_INDEX", "3"}, {"NCCL_IB_TC", "106"}, {"NCCL_IB_TIMEOUT", "22"}}};
  if (name == "tcp")
    return NcclProfile{"tcp",
                       {{"NCCL_IB_DISABLE", "1"}, {"NCCL_SOCKET_NTHREADS", "4"}, {"NCCL_NSOCKS_PERTHREAD", "4"}}};
  if (name == "off") return NcclProfile{"off", {}};
  return std::nullopt;
}

NcclProfile parse_profile(std::string_view name, std::string_view origin, std::string_view text) {
  check_profile_name("profile name", name);
  if (text.size() > kMaxProfileFileSize)
    throw InputError(std::string(origin) + ": larger than " + std::to_string(kMaxProfileFileSize) + " bytes");
  NcclProfile profile{std::string(name), {}};
  std::vector<std::string> allowed;
  std::vector<std::pair<std::string, std::size_t>> debug_keys;  // key, line
  std::size_t line_no = 0, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    std::string_view raw = text.substr(start, end == text.npos ? text.npos : end - start);
    start = end == text.npos ? text.size() : end + 1;
    ++line_no;
    std::string where = std::string(origin) + ":" + std::to_string(line_no);
    std::string_view line = raw;
    if (auto hash = line.find('#'); hash != line.npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    if (line.find('\0') != line.npos) throw InputError(where + ": contains a NUL byte");
    auto eq = line.find('=');
    // Not quoted: a line that is no KEY=VALUE may be anything (a password hash, a key).
    if (eq == line.npos) throw InputError(where + ": expected KEY=VALUE (the line is not shown)");
    std::string_view key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "allow_debug") {
      check_text(where + ": allow_debug", value, 1024);
      for (const auto& item : split_list(value)) {
        check_key(where, item);
        if (!is_debug_key(item))
          throw InputError(where + ": allow_debug names " + item + ", which is not a debugging key");
        allowed.push_back(item);
      }
      continue;
    }
    check_key(where, key);
    check_value(where, key, value);
    for (const auto& [seen, _] : profile.variables)
      if (seen == key) throw InputError(where + ": " + std::string(key) + " is set twice");
    if (profile.variables.size() >= 256) throw InputError(where + ": more than 256 variables");
    if (is_debug_key(key)) debug_keys.emplace_back(std::string(key), line_no);
    profile.variables.emplace_back(std::string(key), std::string(value));
  }
  for (const auto& [key, line] : debug_keys)
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw InputError(std::string(origin) + ":" + std::to_string(line) + ": " + key +
                       " is a debugging key; a profile sets it only when the file says allow_debug=" + key);
  return profile;
}

NcclProfile load_profile(std::string_view name, const std::string& profiles_dir) {
  check_profile_name("NCCL profile", name);
  if (!profiles_dir.empty()) {
    fs::path path = fs::path(profiles_dir) / (std::string(name) + ".conf");
    std::error_code ec;
    // symlink_status: a dangling link is a link too, refused rather than taken for no file.
    if (fs::exists(fs::symlink_status(path, ec))) return parse_profile(name, path.string(), read_profile_file(path));
  }
  if (auto builtin = builtin_profile(name)) return *builtin;
  throw InputError("NCCL profile " + quote_value(name) +
                   " does not exist (available: " + join(available_profiles(profiles_dir)) + ")");
}

std::vector<std::string> available_profiles(const std::string& profiles_dir) {
  std::vector<std::string> names = {"ib", "off", "roce", "tcp"};
  std::error_code ec;
  if (!profiles_dir.empty() && fs::is_directory(profiles_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(profiles_dir, ec)) {
      if (entry.path().extension() != ".conf" || entry.is_symlink(ec)) continue;
      std::string stem = entry.path().stem().string();
      try {
        check_profile_name("", stem);
      } catch (const InputError&) {
        continue;
      }
      if (std::find(names.begin(), names.end(), stem) == names.end()) names.push_back(stem);
      if (names.size() > 64) break;
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

NcclAssignment resolve_nccl(const NcclProfile& profile, bool explicit_option,
                            const std::function<std::optional<std::string>(const std::string&)>& exported) {
  NcclAssignment out;
  for (const auto& [key, value] : profile.variables) {
    if (!explicit_option && exported(key)) {
      out.kept_from_user.push_back(key);
      continue;
    }
    out.set.emplace_back(key, value);
  }
  return out;
}

std::optional<std::string> check_socket_ifname(std::string_view value, const std::string& node,
                                               const std::vector<std::string>& interfaces) {
  std::string_view list = trim(value);
  if (list.empty()) return std::nullopt;
  bool exclude = list.front() == '^';
  if (exclude) list.remove_prefix(1);
  bool exact = !list.empty() && list.front() == '=';
  if (exact) list.remove_prefix(1);
  auto matches = [&](const std::string& iface, const std::string& item) {
    return exact ? iface == item : iface.rfind(item, 0) == 0;
  };
  std::vector<std::string> items = split_list(list);
  bool any = false;
  for (const auto& iface : interfaces) {
    bool hit = std::any_of(items.begin(), items.end(),
                           [&](const std::string& item) { return !item.empty() && matches(iface, item); });
    if (hit != exclude && !(exclude && iface == "lo")) any = true;
  }
  if (any) return std::nullopt;
  return "NCCL_SOCKET_IFNAME=" + std::string(trim(value)) + " matches no interface on " + node +
         " (it has: " + (interfaces.empty() ? std::string("none") : join(interfaces)) + ")";
}

}  // namespace slurm_train
