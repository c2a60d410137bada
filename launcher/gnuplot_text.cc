#include "launcher/gnuplot_text.h"

#include <fmt/format.h>

#include <stdexcept>

#include "spank/jobenv/text.h"

namespace slurm_train {

namespace {

bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

std::string single_quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (is_control(c))
      out += "\xEF\xBF\xBD";  // U+FFFD in UTF-8
    else if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

std::string gnuplot_text(std::string_view text) { return single_quoted(text); }

std::string gnuplot_path(std::string_view what, std::string_view path) {
  if (path.empty()) throw std::runtime_error(fmt::format("{} is empty: expected a file's path", what));
  for (std::size_t i = 0; i < path.size(); ++i)
    if (is_control(path[i]))
      throw std::runtime_error(fmt::format(
          "{} '{}' holds a control character (byte {} is \\x{:02x}): expected a path without one (gnuplot ends its "
          "command at a newline and its line at a NUL; the rest would be read as commands)",
          what, escape_bytes(path), i, static_cast<unsigned char>(path[i])));
  return single_quoted(path.front() == '/' ? std::string(path) : "./" + std::string(path));
}

}  // namespace slurm_train
