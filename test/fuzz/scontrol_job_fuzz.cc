// libFuzzer target: the parser of `scontrol show job --oneliner` output, and what the launcher
// derives from it (the requeue target, why a job cannot be requeued). Seeds: real output.
#include "launcher/requeue.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::rejecting_cleanly([&] {
    JobFacts job = parse_scontrol_show_job(text);
    requeue_target(job);
    why_not_requeueable(job);
  });
  return 0;
}
