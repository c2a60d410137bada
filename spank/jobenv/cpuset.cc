#include "spank/jobenv/cpuset.h"

#include <algorithm>

#include "spank/jobenv/text.h"

namespace slurm_train {

CpuSet parse_cpulist(std::string_view what, std::string_view text) {
  std::string_view list = trim(text);
  CpuSet cpus;
  if (list.empty()) return cpus;
  if (list.size() > 64 * 1024) check_text(what, list, 64 * 1024);
  auto id = [&](std::string_view part) {
    return static_cast<int>(parse_uint(std::string(what) + " CPU id", part, 0, kMaxCpuId));
  };
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string_view item = list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    std::size_t dash = item.find('-');
    int lo = id(item.substr(0, dash));
    int hi = dash == std::string_view::npos ? lo : id(item.substr(dash + 1));
    if (hi < lo)
      throw InputError(std::string(what) + " " + quote_value(text) + ": range " + quote_value(item) +
                       " runs backwards");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpulist(const CpuSet& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

CpuSet intersect(const CpuSet& a, const CpuSet& b) {
  CpuSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace slurm_train
