// What toml++ 3.3 (Debian 12's) aborts on instead of reporting: its assertions turned into an
// exception, and the input that reaches them refused first, with its place. All of it goes once
// the parser reports these as parse errors; config.cc includes toml++ through this header only.
#pragma once

#include <stdexcept>
#include <string>

namespace slurm_train {

// toml++ checks some malformed input ('[#x]', 'a = [[}') with assertions: such an assertion is an
// error about the file here, never an abort.
struct TomlAssertion : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void toml_assertion_failed(const char* expression) { throw TomlAssertion(expression); }

// Throws ConfigError naming path:line:column for what toml++ 3.3 would abort on or fail an
// assertion for: a control character other than tab and the line ends, a table header that
// does not start with a name, a character that is not ASCII outside strings and comments.
void refuse_what_the_toml_parser_cannot_take(const std::string& text, const std::string& path);

}  // namespace slurm_train

#define TOML_ASSERT(expr) ((expr) ? static_cast<void>(0) : ::slurm_train::toml_assertion_failed(#expr))
#include <toml++/toml.h>
