// libFuzzer target: the --preempt-signals list parser ("USR2,TERM", "SIGUSR2", "12"); every
// signal it accepts has a name and can be caught.
#include <csignal>

#include "launcher/preempt_signals.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string list(reinterpret_cast<const char*>(data), size);
  fuzz::rejecting_cleanly([&] {
    for (int signal : parse_signal_list(list)) {
      if (signal == SIGKILL || signal == SIGSTOP || signal <= 0) std::abort();
      if (signal_name(signal).empty()) std::abort();
    }
  });
  return 0;
}
