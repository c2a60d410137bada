#include "hostlist.h"

#include <charconv>
#include <cstdio>

namespace slurm_train {
namespace {

[[noreturn]] void fail(std::string_view hostlist, std::size_t pos, std::string_view what) {
  std::string shown(hostlist.substr(0, 80));
  if (hostlist.size() > 80) shown += "...";
  throw HostlistError("hostlist '" + shown + "': " + std::string(what) + " at position " + std::to_string(pos));
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A character as a reader should see it: 'x' when printable, else its code (a newline, a NUL).
std::string describe(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  char code[8];
  std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned char>(c));
  return code;
}

struct Parser {
  std::string_view text;
  std::size_t pos = 0;

  bool done() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }

  // A decimal number inside brackets; returns its value and its written width.
  std::pair<unsigned long, std::size_t> number() {
    std::size_t start = pos;
    while (!done() && is_digit(peek())) ++pos;
    if (pos == start) fail(text, pos, "expected a number in the range");
    if (pos - start > 9) fail(text, start, "range number longer than 9 digits");
    unsigned long value = 0;
    std::from_chars(text.data() + start, text.data() + pos, value);
    return {value, pos - start};
  }

  // "[1-3,07]" -> {"1","2","3","07"}; the opening bracket is at pos.
  std::vector<std::string> bracket() {
    std::size_t open = pos++;
    std::vector<std::string> values;
    for (;;) {
      auto [lo, width] = number();
      unsigned long hi = lo;
      if (!done() && peek() == '-') {
        ++pos;
        hi = number().first;
        if (hi < lo) fail(text, pos, "range runs backwards (" + std::to_string(lo) + "-" + std::to_string(hi) + ")");
      }
      if (hi - lo >= kMaxHosts || values.size() + (hi - lo + 1) > kMaxHosts)
        fail(text, pos, "more than " + std::to_string(kMaxHosts) + " hosts");
      for (unsigned long v = lo; v <= hi; ++v) {
        std::string digits = std::to_string(v);
        if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
        values.push_back(std::move(digits));
      }
      if (done()) fail(text, open, "unclosed '['");
      if (peek() == ',') {
        ++pos;
        continue;
      }
      if (peek() == ']') {
        ++pos;
        return values;
      }
      fail(text, pos, "unexpected " + describe(peek()) + " in a range (expected digits, '-', ',' or ']')");
    }
  }

  // One comma-separated item, expanded: literal text and bracket groups, multiplied out.
  std::vector<std::string> item() {
    std::vector<std::string> names{""};
    std::size_t start = pos;
    while (!done() && peek() != ',') {
      if (peek() == '[') {
        std::vector<std::string> values = bracket();
        if (names.size() * values.size() > kMaxHosts)
          fail(text, pos, "more than " + std::to_string(kMaxHosts) + " hosts");
        std::vector<std::string> product;
        product.reserve(names.size() * values.size());
        for (const auto& prefix : names)
          for (const auto& v : values) product.push_back(prefix + v);
        names = std::move(product);
      } else if (is_name_char(peek())) {
        for (auto& n : names) n += peek();
        ++pos;
      } else if (peek() == ']') {
        fail(text, pos, "']' without '['");
      } else {
        fail(text, pos, "character " + describe(peek()) + " not allowed in a host name");
      }
    }
    if (pos == start) fail(text, pos, "empty host name");
    if (names.front().size() > kMaxHostnameLength)
      fail(text, start, "host name longer than " + std::to_string(kMaxHostnameLength));
    return names;
  }
};

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view hostlist) {
  if (hostlist.empty()) throw HostlistError("hostlist is empty (expected e.g. 'node[01-04],login1')");
  if (hostlist.size() > kMaxHostlistLength)
    throw HostlistError("hostlist is " + std::to_string(hostlist.size()) + " characters long (at most " +
                        std::to_string(kMaxHostlistLength) + ")");
  Parser p{hostlist};
  std::vector<std::string> hosts;
  for (;;) {
    std::vector<std::string> names = p.item();
    if (hosts.size() + names.size() > kMaxHosts)
      fail(hostlist, p.pos, "more than " + std::to_string(kMaxHosts) + " hosts");
    hosts.insert(hosts.end(), std::make_move_iterator(names.begin()), std::make_move_iterator(names.end()));
    if (p.done()) return hosts;
    ++p.pos;  // the comma
    if (p.done()) fail(hostlist, p.pos, "trailing ','");
  }
}

}  // namespace slurm_train
