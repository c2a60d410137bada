#include "train/crash_contained.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
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
std::string contained_read_program;  // set once, before any read

// What ended a child (its wait status), or nullopt when it finished.
std::optional<std::string> ending_of(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == kFinished) return std::nullopt;
  if (WIFSIGNALED(status))
    return fmt::format("ended in signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("ended in exit status {}", WEXITSTATUS(status));
}

void make_child_quiet_and_mortal(pid_t parent) {
  // Killed when the thread that started it ends: a parent killed by its own time limit (a batch
  // job's, a fuzzer's) leaves no child spinning in libhdf5. Checked after, for a parent that
  // ended before the request took.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(kFinished);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
}

[[noreturn]] void run_child(const std::function<void()>& read, pid_t parent) {
  make_child_quiet_and_mortal(parent);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) std::signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
  try {
    read();
  } catch (...) {
    // A clean rejection: the parent's own read finds and reports it.
  }
  _exit(kFinished);  // no atexit handlers: they belong to the parent (MPI, HDF5, the sanitizers)
}

// Waits for `pid` until `time_limit`; false when it had not ended by then. A pidfd tells the
// moment it ends; without one (a kernel before 5.3), it polls with a growing interval (1 ms to
// 50 ms). No signal handler or signal mask of the caller's is touched.
bool wait_until(pid_t pid, int& status, milliseconds time_limit) {
  const auto deadline = std::chrono::steady_clock::now() + time_limit;
  if (const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); fd >= 0) {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1'000'000)));
      if (ready > 0 || (ready == 0 && left.count() <= 0)) break;
      if (ready < 0 && errno != EINTR) break;
    }
    ::close(fd);
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
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

// Waits for the child `pid` for at most `time_limit`, then stops it.
std::optional<std::string> outcome_of(pid_t pid, milliseconds time_limit) {
  int status = 0;
  if (!wait_until(pid, status, time_limit)) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return fmt::format("was stopped after {:.3g} s without finishing", time_limit.count() / 1000.0);
  }
  return ending_of(status);
}

}  // namespace

std::optional<std::string> crash_in_child(const std::function<void()>& read, milliseconds time_limit) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;  // EAGAIN, ENOMEM: the read is still checked, only not contained
  if (pid == 0) run_child(read, parent);
  return outcome_of(pid, time_limit);
}

void set_contained_read_program(std::string path) { contained_read_program = std::move(path); }

std::optional<std::string> crash_in_child(const ContainedRead& read, milliseconds time_limit) {
  if (contained_read_program.empty()) return crash_in_child(read.in_process, time_limit);
  std::vector<std::string> words{contained_read_program, kContainedReadFlag, std::to_string(::getpid()), read.reader};
  words.insert(words.end(), read.args.begin(), read.args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  if (posix_spawn_file_actions_init(&actions) != 0) return crash_in_child(read.in_process, time_limit);
  posix_spawnattr_init(&attributes);
  // Its messages would repeat the caller's, which reports the outcome once, naming the file.
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) return crash_in_child(read.in_process, time_limit);  // the program is gone: fork instead
  return outcome_of(pid, time_limit);
}

int contained_read_child(int argc, char** argv,
                         const std::function<int(const std::string&, const std::vector<std::string>&)>& run) {
  if (argc < 4) return 2;
  make_child_quiet_and_mortal(static_cast<pid_t>(std::atoll(argv[2])));
  return run(argv[3], std::vector<std::string>(argv + 4, argv + argc));
}

milliseconds time_limit_to_read(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  const auto scaled = milliseconds{ec ? 0 : static_cast<std::int64_t>(bytes / (kSlowestBytesPerSecond / 1000))};
  return milliseconds{base_limit_ms.load()} + scaled;
}

void set_base_time_limit_to_read(milliseconds base) { base_limit_ms.store(base.count()); }

}  // namespace slurm_train
