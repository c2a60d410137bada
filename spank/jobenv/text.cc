#include "spank/jobenv/text.h"

#include <charconv>
#include <cstdio>

namespace slurm_train {

namespace {

void append_escaped(std::string& out, char c) {
  if (c >= 0x20 && c < 0x7f) {
    out += c;
    return;
  }
  char code[8];
  std::snprintf(code, sizeof code, "\\x%02x", static_cast<unsigned char>(c));
  out += code;
}

}  // namespace

std::string quote_value(std::string_view value) {
  std::string out = "'";
  std::size_t shown = 0;
  for (char c : value) {
    if (shown++ == 80) {
      out += "...";
      break;
    }
    append_escaped(out, c);
  }
  return out + "'";
}

std::string escape_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) append_escaped(out, c);
  return out;
}

void check_text(std::string_view what, std::string_view value, std::size_t max_length, bool allow_space) {
  if (value.empty()) throw InputError(std::string(what) + " is empty");
  if (value.size() > max_length)
    throw InputError(std::string(what) + " " + quote_value(value) + " is " + std::to_string(value.size()) +
                     " characters long (at most " + std::to_string(max_length) + ")");
  for (char c : value) {
    bool printable = c > 0x20 && c < 0x7f;
    if (printable || (allow_space && c == ' ')) continue;
    throw InputError(std::string(what) + " " + quote_value(value) +
                     (c == '\n'  ? " contains a newline"
                      : c == ' ' ? " contains a space"
                                 : " contains a control character"));
  }
}

std::uint64_t parse_uint(std::string_view what, std::string_view value, std::uint64_t lo, std::uint64_t hi) {
  auto expected = [&] {
    return InputError(std::string(what) + " " + quote_value(value) + ": expected a whole number from " +
                      std::to_string(lo) + " to " + std::to_string(hi));
  };
  if (value.empty() || value.size() > 20) throw expected();
  std::uint64_t number = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size() || number < lo || number > hi) throw expected();
  return number;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view blanks = " \t\r\n";
  auto first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  auto last = text.find_last_not_of(blanks);
  return text.substr(first, last - first + 1);
}

}  // namespace slurm_train
