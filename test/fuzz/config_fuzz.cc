// libFuzzer target: the run configuration, a TOML file with its overrides. The input is the
// TOML text, then after a NUL byte one override a line: SLURM_TRAIN_<SECTION>_<KEY>=value as an
// environment variable, section.key=value as a command-line override. Seeds: examples/*.toml.
// A configuration that is accepted and valid must print as TOML that reads back the same.
#include <string>
#include <string_view>
#include <vector>

#include "test/fuzz/fuzz_support.h"
#include "train/config/config.h"

using namespace slurm_train;

namespace {

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    text.remove_prefix(end == text.npos ? text.size() : end + 1);
  }
  return lines;
}

void apply_overrides(RunConfig& config, std::string_view text) {
  std::vector<std::string> environment;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("SLURM_TRAIN_", 0) == 0) {
      environment.push_back(line);
      continue;
    }
    std::size_t eq = line.find('=');
    if (eq != line.npos) apply_config_override(config, line.substr(0, eq), line.substr(eq + 1));
  }
  apply_config_environment(config, environment);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file(".toml");
  static fuzz::InputFile reprinted("-again.toml");
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view toml = input.substr(0, nul);
  const std::string_view overrides = nul == input.npos ? std::string_view() : input.substr(nul + 1);

  RunConfig config;
  try {
    apply_config_file(config, file.write(data, toml.size()));
    apply_overrides(config, overrides);
  } catch (const std::exception&) {
    return 0;
  }
  describe_config(config);
  if (!validate_config(config).empty()) return 0;
  const std::string text = config_as_toml(config);
  RunConfig again;
  try {
    apply_config_file(again, reprinted.write(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "config_as_toml printed TOML that does not read back: %s\n%s\n", e.what(), text.c_str());
    std::abort();
  }
  if (config_as_toml(again) != text) {
    std::fprintf(stderr, "config_as_toml does not round-trip:\n%s\n---\n%s\n", text.c_str(),
                 config_as_toml(again).c_str());
    std::abort();
  }
  return 0;
}
