// Checks of numeric command-line options whose errors name the value and what was expected.
// CLI11's own range checks print DBL_MAX as the upper bound, and an unsigned option takes "-5"
// as 2^64 - 5; these refuse both with a plain sentence, before the command does anything.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace slurm_train {

// A whole number in [min, max], digits only: "--tokens: -1: expected a whole number in [0, 2147483647]".
CLI::Validator whole_number(std::uint64_t max, std::uint64_t min = 0);

// A finite number >= 0; the error reads "--kill-grace: -1: expected <expected>". name is what
// --help shows after the option's type ("FLOAT:SECONDS").
CLI::Validator non_negative_number(const std::string& expected, const std::string& name = "NUMBER");

}  // namespace slurm_train
