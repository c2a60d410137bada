#include "launcher/cli_validators.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <system_error>

namespace slurm_train {

CLI::Validator whole_number(std::uint64_t max, std::uint64_t min) {
  return CLI::Validator(
      [max, min](std::string& value) -> std::string {
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n > max || n < min)
          return fmt::format("{}: expected a whole number in [{}, {}]", value, min, max);
        return "";
      },
      "N");
}

CLI::Validator non_negative_number(const std::string& expected, const std::string& name) {
  return CLI::Validator(
      [expected](std::string& value) -> std::string {
        double d = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), d);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size() || !std::isfinite(d) || d < 0)
          return fmt::format("{}: expected {}", value, expected);
        return "";
      },
      name);
}

}  // namespace slurm_train
