#include "train/crash_contained.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

// Set by the sanitizer runtimes when present: a sanitizer build's child must end as any crash
// does, not run the handlers its parent installed (libFuzzer's would record a finding).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace slurm_train {
namespace {

using std::chrono::milliseconds;

constexpr int kFinished = 0;
constexpr std::uintmax_t kSlowestBytesPerSecond = 10'000'000;
std::atomic<std::int64_t> base_limit_ms{60'000};

[[noreturn]] void run_child(const std::function<void()>& read, pid_t parent) {
  // Killed when the thread that forked it ends: a parent killed by its own time limit (a batch
  // job's, a fuzzer's) leaves no child spinning in libhdf5. Checked after, for a parent that
  // ended before the request took.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(kFinished);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) std::signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
  try {
    read();
  } catch (...) {
    // A clean rejection: the parent's own read finds and reports it.
  }
  _exit(kFinished);  // no atexit handlers: they belong to the parent (MPI, HDF5, the sanitizers)
}

// Waits for `pid` until `time_limit`; false when it had not ended by then. Polls with a growing
// interval (1 ms to 50 ms): most reads end within milliseconds, and no signal handler or signal
// mask of the caller's is touched.
bool wait_until(pid_t pid, int& status, milliseconds time_limit) {
  const auto deadline = std::chrono::steady_clock::now() + time_limit;
  milliseconds interval{1};
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // ECHILD: reaped elsewhere; status stays 0 (finished)
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
    interval = std::min(interval * 2, milliseconds{50});
  }
}

}  // namespace

std::optional<std::string> crash_in_child(const std::function<void()>& read, milliseconds time_limit) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;  // EAGAIN, ENOMEM: the read is still checked, only not contained
  if (pid == 0) run_child(read, parent);
  int status = 0;
  if (!wait_until(pid, status, time_limit)) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return fmt::format("was stopped after {:.3g} s without finishing", time_limit.count() / 1000.0);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kFinished) return std::nullopt;
  if (WIFSIGNALED(status))
    return fmt::format("ended in signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("ended in exit status {}", WEXITSTATUS(status));
}

milliseconds time_limit_to_read(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  const auto scaled = milliseconds{ec ? 0 : static_cast<std::int64_t>(bytes / (kSlowestBytesPerSecond / 1000))};
  return milliseconds{base_limit_ms.load()} + scaled;
}

void set_base_time_limit_to_read(milliseconds base) { base_limit_ms.store(base.count()); }

}  // namespace slurm_train
