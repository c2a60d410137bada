#include "train/io/memory_budget.h"

#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace slurm_train {

namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::uint64_t limit_of(int resource) {
  rlimit limit{};
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return limit.rlim_cur;
}

// What is left of a limit once `used` is taken; a limit of 0 is none.
std::uint64_t left_of(std::uint64_t limit, std::uint64_t used) {
  if (limit == 0) return kUnlimited;
  return limit > used ? limit - used : 0;
}

}  // namespace

std::optional<std::uint64_t> checked_bytes(const std::vector<std::uint64_t>& dims, std::uint64_t element_size) {
  std::uint64_t bytes = element_size;
  for (std::uint64_t d : dims) {
    if (d != 0 && bytes > kUnlimited / d) return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

std::optional<std::uint64_t> kib_field(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    std::uint64_t kib = 0;
    if (!(fields >> kib) || kib > kUnlimited / 1024) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::uint64_t allocatable_bytes(const MemoryFacts& f) {
  return std::min({f.mem_available == 0 ? kUnlimited : f.mem_available, left_of(f.limit_as, f.mapped),
                   left_of(f.limit_data, f.data)});
}

MemoryFacts current_memory_facts() {
  MemoryFacts f;
  f.mem_available = kib_field(read_text("/proc/meminfo"), "MemAvailable").value_or(0);
  f.limit_as = limit_of(RLIMIT_AS);
  f.limit_data = limit_of(RLIMIT_DATA);
  const std::string status = read_text("/proc/self/status");
  f.mapped = kib_field(status, "VmSize").value_or(0);
  f.data = kib_field(status, "VmData").value_or(0);
  return f;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) value /= 1024, ++unit;
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

void require_memory(const std::string& what, std::optional<std::uint64_t> bytes, const std::string& why,
                    const MemoryFacts& facts) {
  const std::uint64_t available = allocatable_bytes(facts);
  if (bytes && *bytes <= available) return;
  const std::string needs = bytes ? format_bytes(*bytes) : "more than 16 EiB";
  std::string limits =
      fmt::format("MemAvailable {}", facts.mem_available ? format_bytes(facts.mem_available) : "unknown");
  if (facts.limit_as)
    limits +=
        fmt::format(", ulimit -v {} of which {} mapped", format_bytes(facts.limit_as), format_bytes(facts.mapped));
  if (facts.limit_data)
    limits += fmt::format(", ulimit -d {} of which {} used", format_bytes(facts.limit_data), format_bytes(facts.data));
  throw MemoryError(fmt::format("{} needs {} ({}), but only {} can be allocated here ({})", what, needs, why,
                                format_bytes(available), limits));
}

}  // namespace slurm_train
