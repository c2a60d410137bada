#include "train/crash_contained.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

// Set by the sanitizer runtimes when present: a sanitizer build's child must end as any crash
// does, not run the handlers its parent installed (libFuzzer's would record a finding).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace slurm_train {
namespace {

constexpr int kFinished = 0;

[[noreturn]] void run_child(const std::function<void()>& read) {
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

}  // namespace

std::optional<std::string> crash_in_child(const std::function<void()>& read) {
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;  // EAGAIN, ENOMEM: the read is still checked, only not contained
  if (pid == 0) run_child(read);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kFinished) return std::nullopt;
  if (WIFSIGNALED(status))
    return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exit status {}", WEXITSTATUS(status));
}

}  // namespace slurm_train
