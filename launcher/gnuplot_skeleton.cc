#include "launcher/gnuplot_skeleton.h"

#include <vector>

namespace slurm_train {

namespace {

// The script's lines after gnuplot's reading: cut at a NUL, a CR before the end dropped,
// continued lines joined.
std::vector<std::string> logical_lines(std::string_view script) {
  std::vector<std::string> lines;
  std::string line;
  bool continued = false;
  while (!script.empty()) {
    const std::size_t end = script.find('\n');
    std::string_view physical = script.substr(0, end);
    script = end == std::string_view::npos ? std::string_view{} : script.substr(end + 1);
    physical = physical.substr(0, physical.find('\0'));
    if (!physical.empty() && physical.back() == '\r') physical.remove_suffix(1);
    continued = !physical.empty() && physical.back() == '\\';
    if (continued) physical.remove_suffix(1);
    line += physical;
    if (continued) continue;
    lines.push_back(std::move(line));
    line.clear();
  }
  if (continued) lines.push_back(std::move(line));
  return lines;
}

std::string_view trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

void end_statement(std::string& skeleton, std::string& statement) {
  const std::string_view s = trimmed(statement);
  if (!s.empty()) skeleton.append(s).push_back('\n');
  statement.clear();
}

}  // namespace

std::string gnuplot_skeleton(std::string_view script) {
  std::string skeleton, statement;
  for (const std::string& line : logical_lines(script)) {
    enum { kCode, kSingle, kDouble } state = kCode;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (state == kSingle) {
        if (c != '\'') continue;
        if (i + 1 < line.size() && line[i + 1] == '\'') {
          ++i;
          continue;
        }
        statement += c;
        state = kCode;
      } else if (state == kDouble) {
        if (c == '\\' && i + 1 < line.size() && line[i + 1] != '`') {
          ++i;
        } else if (c == '`') {
          statement += c;
        } else if (c == '"') {
          statement += c;
          state = kCode;
        }
      } else if (c == '#') {
        break;
      } else if (c == ';') {
        end_statement(skeleton, statement);
      } else {
        statement += c;
        if (c == '\'') state = kSingle;
        if (c == '"') state = kDouble;
      }
    }
    end_statement(skeleton, statement);
  }
  return skeleton;
}

}  // namespace slurm_train
