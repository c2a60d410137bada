// Checks shared by every parser of outside input (options, environment defaults, site arguments,
// profile files, sysfs): bounded length, plain printable characters, whole-number parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace slurm_train {

// Bad outside input. what() names the input, the value (shown safely) and what was expected.
struct InputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A value as a message may quote it: at most 80 characters, control bytes as \xNN.
std::string quote_value(std::string_view value);

// Text as a terminal may print it: every byte outside printable ASCII (control bytes, DEL, the
// bytes of a binary file) as \xNN, the rest unchanged.
std::string escape_bytes(std::string_view text);

// Throws InputError unless value is 1..max_length printable ASCII characters (no space when
// allow_space is false, never a newline, NUL or other control byte). `what` names the input.
void check_text(std::string_view what, std::string_view value, std::size_t max_length, bool allow_space = false);

// A whole decimal number in [lo, hi]; InputError naming `what` otherwise.
std::uint64_t parse_uint(std::string_view what, std::string_view value, std::uint64_t lo, std::uint64_t hi);

// Leading and trailing blanks (space, tab, CR, LF) removed.
std::string_view trim(std::string_view text);

}  // namespace slurm_train
