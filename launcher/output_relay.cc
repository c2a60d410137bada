#include "launcher/output_relay.h"

#include <fmt/format.h>

#include <utility>

#include "launcher/rank_log.h"

namespace slurm_train {

namespace {
constexpr std::size_t kTailLineChars = 200;
// A line longer than this (a progress bar redrawn with \r, binary output) is logged in pieces.
constexpr std::size_t kMaxLine = 64 * 1024;
}  // namespace

OutputRelay::OutputRelay(RankLog& log, int rank, Echo echo, std::size_t tail_lines)
    : log_(log), rank_(rank), echo_(std::move(echo)), tail_lines_(tail_lines) {}

void OutputRelay::take(Stream stream, std::string_view bytes) {
  if (rank_ == 0 && echo_) echo_(stream, bytes);
  std::string& pending = pending_[static_cast<int>(stream)];
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending.append(bytes);
      if (pending.size() >= kMaxLine) complete_line(stream, std::exchange(pending, {}));
      return;
    }
    pending.append(bytes.substr(0, newline));
    complete_line(stream, std::exchange(pending, {}));
    bytes.remove_prefix(newline + 1);
  }
}

void OutputRelay::flush() {
  for (const Stream s : {Stream::kStdout, Stream::kStderr}) {
    std::string& pending = pending_[static_cast<int>(s)];
    if (!pending.empty()) complete_line(s, std::exchange(pending, {}));
  }
}

void OutputRelay::complete_line(Stream stream, std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (rank_ != 0 && stream == Stream::kStderr && echo_) echo_(stream, fmt::format("[rank {}] {}\n", rank_, line));
  log_.line(line);
  if (tail_lines_ == 0) return;
  if (line.size() > kTailLineChars) line = line.substr(0, kTailLineChars) + "...";
  tail_.push_back(std::move(line));
  if (tail_.size() > tail_lines_) tail_.pop_front();
}

std::string OutputRelay::tail() const {
  std::string out;
  for (const auto& line : tail_) out += "  | " + line + "\n";
  return out;
}

}  // namespace slurm_train
