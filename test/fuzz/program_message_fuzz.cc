// libFuzzer target: the lines a program under `slurm-train exec` writes to its pipe
// ($SLURM_TRAIN_PROGRAM_PIPE). A line is refused only with std::invalid_argument; a line taken
// has a valid name for every figure and never more of them than allowed.
#include <variant>

#include "launcher/program_message.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  fuzz::rejecting_cleanly([&] {
    const ProgramMessage m = parse_program_message(line);
    if (const auto* figures = std::get_if<ProgramMetrics>(&m)) {
      if (figures->values.size() > kMaxMetricsPerLine) std::abort();
      for (const auto& [name, value] : figures->values)
        if (!metric_name_problem(name).empty()) std::abort();
    }
  });
  return 0;
}
