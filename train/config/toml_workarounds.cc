#include "train/config/toml_workarounds.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>

#include "train/config/config.h"

namespace slurm_train {

namespace {

// TOML allows no control character but tab and the line ends anywhere in a file (toml++ 3.3 fails
// an assertion instead of an error on some, e.g. one inside a table header): refused first, with
// its place.
void require_no_control_characters(const std::string& text, const std::string& path) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool line_end = c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n');
    if ((c < 0x20 && c != '\t' && !line_end) || c == 0x7f)
      throw ConfigError(fmt::format("{}:{}:{}: control character U+{:04X} (TOML allows only tab and line ends)", path,
                                    line, column, c));
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
}

// toml++ 3.3 also fails an assertion (and aborts) on a table header whose name starts with
// anything but a key character or a quote ("[#x]", "[ =x]"), and reaches code it marks
// unreachable on non-ASCII characters where it looks for whitespace, that is outside strings
// (where TOML 1.0 allows none): both refused first, with their place. The scan follows strings
// and comments. A quote opens a string only where a token starts (after a space, a line start,
// the key's '=', or '[', ',' and '{' that start a token themselves); inside a token the parser
// reads a quote as part of the token, and so must this scan (a dotted quoted key, a."b", is
// therefore read as one token: it may not hold non-ASCII characters).
void require_what_the_parser_takes(const std::string& text, const std::string& path) {
  enum class In { kNothing, kBasic, kLiteral, kMultiBasic, kMultiLiteral, kComment } in = In::kNothing;
  std::size_t line = 1, line_start = 0;
  bool line_blank = true;   // only spaces and tabs so far on this line, outside any string
  bool key_part = true;     // before the line's '=': its first '=' separates key and value
  bool token_start = true;  // a new token may start here
  auto at = [&](std::size_t i, const char* token) { return text.compare(i, std::strlen(token), token) == 0; };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      line_blank = key_part = token_start = true;
      if (in == In::kComment || in == In::kBasic || in == In::kLiteral) in = In::kNothing;
      continue;
    }
    switch (in) {
      case In::kBasic:
        if (c == '\\')
          ++i;
        else if (c == '"')
          in = In::kNothing;
        continue;
      case In::kLiteral:
        if (c == '\'') in = In::kNothing;
        continue;
      case In::kMultiBasic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
          ++i;
        else if (at(i, "\"\"\""))
          in = In::kNothing, i += 2;
        continue;
      case In::kMultiLiteral:
        if (at(i, "\'\'\'")) in = In::kNothing, i += 2;
        continue;
      case In::kComment:
        continue;
      case In::kNothing:
        break;
    }
    if (static_cast<unsigned char>(c) >= 0x80)
      throw ConfigError(
          fmt::format("{}:{}:{}: a character that is not ASCII outside a string or comment (TOML "
                      "allows them only in quoted strings and comments)",
                      path, line, i - line_start + 1));
    if (c == '[' && line_blank) {
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '[') ++j;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
      // The end of the file and ']' (no name) toml++ refuses itself.
      const unsigned char first = j < text.size() ? static_cast<unsigned char>(text[j]) : ']';
      const bool named =
          std::isalnum(first) || first == '_' || first == '-' || first == '"' || first == '\'' || first == ']';
      if (!named)
        throw ConfigError(fmt::format(
            "{}:{}:{}: a table header must start with a name ([section]), not {}", path, line, j - line_start + 1,
            std::isprint(first) ? fmt::format("'{}'", static_cast<char>(first)) : fmt::format("byte {:#04x}", first)));
    }
    const bool starts_token = token_start;
    token_start = false;
    if (c == '#') {
      in = In::kComment;
    } else if (c == '"' || c == '\'') {
      if (starts_token) {
        if (at(i, "\"\"\""))
          in = In::kMultiBasic, i += 2;
        else if (at(i, "\'\'\'"))
          in = In::kMultiLiteral, i += 2;
        else
          in = c == '"' ? In::kBasic : In::kLiteral;
      }
    } else if (c == ' ' || c == '\t') {
      token_start = true;
    } else if (c == '=' && key_part) {
      key_part = false;
      token_start = true;
    } else if ((c == '[' || c == ',' || c == '{') && starts_token) {
      token_start = true;
    }
    if (c != ' ' && c != '\t') line_blank = false;
  }
}

}  // namespace

void refuse_what_the_toml_parser_cannot_take(const std::string& text, const std::string& path) {
  require_no_control_characters(text, path);
  require_what_the_parser_takes(text, path);
}

}  // namespace slurm_train
