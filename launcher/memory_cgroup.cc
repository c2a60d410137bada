#include "launcher/memory_cgroup.h"

#include <fstream>
#include <sstream>

namespace slurm_train {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::optional<std::string> oom_count_file(const std::string& proc_self_cgroup, const std::string& root) {
  std::istringstream lines(proc_self_cgroup);
  std::optional<std::string> v2;
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controller,list:path
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      v2 = root + (path == "/" ? "" : path) + "/memory.events";
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") return root + "/" + controllers + (path == "/" ? "" : path) + "/memory.oom_control";
  }
  return v2;
}

std::optional<std::uint64_t> parse_oom_kill(const std::string& text) {
  std::istringstream lines(text);
  for (std::string key; lines >> key;) {
    std::uint64_t value = 0;
    if (!(lines >> value)) return std::nullopt;
    if (key == "oom_kill") return value;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> oom_kills() {
  const auto cgroups = read_text("/proc/self/cgroup");
  if (!cgroups) return std::nullopt;
  const auto file = oom_count_file(*cgroups);
  if (!file) return std::nullopt;
  const auto text = read_text(*file);
  return text ? parse_oom_kill(*text) : std::nullopt;
}

}  // namespace slurm_train
