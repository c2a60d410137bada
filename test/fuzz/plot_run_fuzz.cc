// libFuzzer target: the JSON-lines metrics reader of `slurm-train plot`. Seeds: metrics files
// written by `slurm-train run` (train.metrics).
#include <sstream>

#include "launcher/plot_run.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  fuzz::rejecting_cleanly([&] {
    for (const PlotRun& run : parse_plot_runs(in, "fuzz.jsonl"))
      if (run.step.empty() || run.loss.size() != run.step.size() || run.test_loss.size() != run.eval_step.size())
        std::abort();
  });
  return 0;
}
