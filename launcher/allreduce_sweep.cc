#include "launcher/allreduce_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "spank/jobenv/text.h"

namespace slurm_train {

std::size_t parse_message_size(std::string_view text) {
  constexpr std::size_t kMin = 8, kMax = std::size_t{16} << 30;
  const auto bad = [&] {
    return InputError(
        fmt::format("message size {}: expected bytes from 8 to 16G, as 4096, 512K, 64M or 1G", quote_value(text)));
  };
  std::size_t shift = 0;
  std::string_view digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) throw bad();
  if (value > (kMax >> shift)) throw bad();
  value <<= shift;
  if (value < kMin) throw bad();
  return value;
}

std::vector<std::size_t> message_sizes(std::size_t max_bytes) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 8; bytes < max_bytes; bytes *= 2) sizes.push_back(bytes);
  sizes.push_back(max_bytes);
  return sizes;
}

double algorithm_bandwidth(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double allreduce_bus_bandwidth(double algbw, int ranks) {
  return ranks > 1 ? algbw * 2.0 * (ranks - 1) / ranks : algbw;
}

int plan_iterations(double one_op_seconds, double seconds_left, int sizes_left, int max_iterations) {
  if (one_op_seconds >= seconds_left) return 0;
  // Half the even share: each size also spends a warm-up and a check outside its iterations, and
  // later sizes take longer than the estimate from this one.
  const double share = seconds_left / std::max(sizes_left, 1) / 2;
  const double fit = one_op_seconds > 0 ? std::floor(share / one_op_seconds) : max_iterations;
  return static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(max_iterations)));
}

std::string size_name(std::size_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "GiB"}, std::pair{20, "MiB"}, std::pair{10, "KiB"}})
    if (bytes >= (std::size_t{1} << shift) && bytes % (std::size_t{1} << shift) == 0)
      return fmt::format("{} {}", bytes >> shift, unit);
  return fmt::format("{} B", bytes);
}

std::string sweep_header() {
  return fmt::format("{:>12} {:>12} {:>6} {:>5} {:>11} {:>8} {:>8} {:>7}\n", "size(B)", "count", "type", "redop",
                     "time(us)", "algbw", "busbw", "#wrong") +
         fmt::format("{:>12} {:>12} {:>6} {:>5} {:>11} {:>8} {:>8} {:>7}\n", "", "(elements)", "", "", "", "(GB/s)",
                     "(GB/s)", "");
}

std::string sweep_row(const SweepRow& row, int ranks) {
  const double algbw = algorithm_bandwidth(row.bytes, row.seconds);
  return fmt::format("{:>12} {:>12} {:>6} {:>5} {:>11.2f} {:>8.2f} {:>8.2f} {:>7}\n", row.bytes,
                     row.bytes / sizeof(float), "float", "sum", row.seconds * 1e6, algbw,
                     allreduce_bus_bandwidth(algbw, ranks), row.wrong);
}

std::string sweep_average(const std::vector<SweepRow>& rows, int ranks) {
  double sum = 0;
  for (const SweepRow& r : rows) sum += allreduce_bus_bandwidth(algorithm_bandwidth(r.bytes, r.seconds), ranks);
  return fmt::format("average bus bandwidth: {:.3f} GB/s over {} size(s)\n", rows.empty() ? 0.0 : sum / rows.size(),
                     rows.size());
}

namespace {

std::string link_name(const LinkSpeed& l) {
  return fmt::format("rank {} ({}) -> rank {} ({})", l.from, l.from_node, l.to, l.to_node);
}

}  // namespace

std::string link_lines(const std::vector<LinkSpeed>& links) {
  std::string out;
  for (const LinkSpeed& l : links) out += fmt::format("  {}  {:.3f} GB/s\n", link_name(l), l.gbps);
  return out;
}

LinkVerdict judge_links(const std::vector<LinkSpeed>& links) {
  if (links.empty()) return {false, "no link to test (one rank)"};
  std::vector<LinkSpeed> sorted = links;
  std::sort(sorted.begin(), sorted.end(), [](const LinkSpeed& a, const LinkSpeed& b) { return a.gbps < b.gbps; });
  const LinkSpeed& slowest = sorted.front();
  if (sorted.size() == 1) return {false, fmt::format("one link {}: {:.3f} GB/s", link_name(slowest), slowest.gbps)};
  // The reference leaves out the two slowest links, the two a slow node would slow (with two
  // links, the other one).
  const std::size_t first = sorted.size() >= 3 ? 2 : 1, n = sorted.size() - first;
  const double reference =
      n % 2 == 1 ? sorted[first + n / 2].gbps : (sorted[first + n / 2 - 1].gbps + sorted[first + n / 2].gbps) / 2;
  const std::string line = fmt::format("slowest link {}: {:.3f} GB/s; the median of the {} fastest {:.3f} GB/s",
                                       link_name(slowest), slowest.gbps, n, reference);
  if (slowest.gbps >= reference / 2) return {false, line};
  if (sorted.size() >= 3 && sorted[1].gbps < reference / 2) {
    const LinkSpeed& next = sorted[1];
    for (const std::string& node : {slowest.from_node, slowest.to_node})
      if (node == next.from_node || node == next.to_node)
        return {true, fmt::format("node {} is slow: its links in and out run at {:.3f} and {:.3f} GB/s, below half "
                                  "the others' {:.3f}; {}",
                                  node, slowest.gbps, next.gbps, reference, line)};
  }
  return {true, line + ": below half"};
}

}  // namespace slurm_train
