#include "launcher/program_message.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace slurm_train {

namespace {

bool name_char(char c, bool first) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') return true;
  return !first && ((c >= '0' && c <= '9') || c == '.' || c == '/' || c == '-');
}

// A short, printable excerpt of outside text for an error message.
std::string excerpt(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 60)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return text.size() > 60 ? out + "..." : out;
}

}  // namespace

std::string metric_name_problem(std::string_view name) {
  if (name.empty()) return "a metric's name is empty";
  if (name.size() > kMaxMetricName)
    return fmt::format("metric name '{}' is longer than {} characters", excerpt(name), kMaxMetricName);
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0))
      return fmt::format("metric name '{}': expected letters, digits and _ . / - only, starting with a letter or _",
                         excerpt(name));
  if (name == "run" || name == "step" || name == "time")
    return fmt::format("metric name '{}' is taken by the metrics file's own field", name);
  return "";
}

ProgramMessage parse_program_message(std::string_view line) {
  if (line.size() > kMaxProgramLine)
    throw std::invalid_argument(fmt::format("a line of {} bytes (at most {})", line.size(), kMaxProgramLine));
  const nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument(fmt::format("'{}': expected a JSON object", excerpt(line)));
  if (j.contains("done")) {
    if (j.size() != 1 || !j["done"].is_boolean() || !j["done"].get<bool>())
      throw std::invalid_argument(fmt::format("'{}': expected {{\"done\": true}} alone", excerpt(line)));
    return ProgramDone{};
  }
  if (!j.contains("step") || !j["step"].is_number_unsigned())
    throw std::invalid_argument(fmt::format("'{}': expected \"step\", a whole number >= 0", excerpt(line)));
  ProgramMetrics m;
  m.step = j["step"].get<std::uint64_t>();
  for (const auto& [key, value] : j.items())
    if (key != "step" && key != "metrics")
      throw std::invalid_argument(fmt::format("'{}': unknown field \"{}\"", excerpt(line), excerpt(key)));
  if (!j.contains("metrics")) return m;
  const nlohmann::json& metrics = j["metrics"];
  if (!metrics.is_object())
    throw std::invalid_argument(fmt::format("'{}': expected \"metrics\" to be an object", excerpt(line)));
  if (metrics.size() > kMaxMetricsPerLine)
    throw std::invalid_argument(fmt::format("{} metrics in one line (at most {})", metrics.size(), kMaxMetricsPerLine));
  for (const auto& [key, value] : metrics.items()) {
    if (const std::string problem = metric_name_problem(key); !problem.empty()) throw std::invalid_argument(problem);
    if (value.is_null())
      m.values.emplace_back(key, std::numeric_limits<double>::quiet_NaN());
    else if (value.is_number())
      m.values.emplace_back(key, value.get<double>());
    else
      throw std::invalid_argument(
          fmt::format("metric '{}': expected a number or null, got {}", key, excerpt(value.dump())));
  }
  return m;
}

}  // namespace slurm_train
