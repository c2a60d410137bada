// The command line's numeric checks: what they take, and the value and range their errors name.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/cli_validators.h"

using namespace slurm_train;

namespace {

// The error CLI11 raises for `--value TEXT` under the validator, or "" when it takes it.
std::string refusal(const CLI::Validator& check, const std::string& text) {
  CLI::App app;
  std::string value;
  app.add_option("--value", value)->check(check);
  std::vector<std::string> args{text, "--value"};  // CLI11 reads them from the back
  try {
    app.parse(args);
  } catch (const CLI::ValidationError& e) {
    return e.what();
  }
  CHECK(value == text);
  return "";
}

}  // namespace

TEST_CASE("whole_number: digits up to the bound; a sign, a fraction, an exponent or an overflow named") {
  const CLI::Validator up_to_int = whole_number(2147483647);
  for (const char* ok : {"0", "7", "2147483647"}) CHECK(refusal(up_to_int, ok).empty());
  for (const char* bad : {"-1", "+1", "2147483648", "1.5", "1e3", "", " 1", "x"})
    CHECK(refusal(up_to_int, bad) == std::string("--value: ") + bad + ": expected a whole number in [0, 2147483647]");
  const CLI::Validator any = whole_number(UINT64_MAX);
  CHECK(refusal(any, "18446744073709551615").empty());
  CHECK(refusal(any, "18446744073709551616") ==
        "--value: 18446744073709551616: expected a whole number in [0, 18446744073709551615]");
  CHECK(refusal(any, "-5") == "--value: -5: expected a whole number in [0, 18446744073709551615]");
}

TEST_CASE("non_negative_number: finite and at least 0; the value and the expectation named") {
  const CLI::Validator seconds = non_negative_number("seconds, a number >= 0");
  for (const char* ok : {"0", "0.5", "120", "1e3"}) CHECK(refusal(seconds, ok).empty());
  for (const char* bad : {"-1", "-0.5", "nan", "inf", "1e400", "", "5s"})
    CHECK(refusal(seconds, bad) == std::string("--value: ") + bad + ": expected seconds, a number >= 0");
}

TEST_CASE("whole_number with a lower bound: below it is named with the range") {
  const CLI::Validator positive = whole_number(4294967295, 1);
  CHECK(refusal(positive, "1").empty());
  CHECK(refusal(positive, "0") == "--value: 0: expected a whole number in [1, 4294967295]");
}
