// libFuzzer target: the --inject-fault spec parser, and the plan it gives asked about a few
// steps and ranks.
#include "launcher/fault_injection.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  fuzz::rejecting_cleanly([&] {
    FaultPlan plan = parse_fault_plan(spec);
    for (std::uint64_t step : {std::uint64_t{0}, std::uint64_t{5}, ~std::uint64_t{0}})
      for (int rank : {0, 1, 1 << 30}) fault_at(plan, step, rank);
  });
  return 0;
}
