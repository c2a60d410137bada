#include "train/io/crash_contained.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>

#include <fmt/format.h>

// Set by the sanitizer runtimes when present: a sanitizer build's child must end as any crash
// does, not run the handlers its parent installed (libFuzzer's would record a finding).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace slurm_train {
namespace {

using std::chrono::milliseconds;

constexpr int kFinished = 0;
constexpr std::size_t kLargestMessage = 64 << 10;  // a request to the read server
constexpr std::uintmax_t kSlowestBytesPerSecond = 10'000'000;
std::atomic<std::int64_t> base_limit_ms{60'000};
std::string contained_read_program;  // set once, before any read

// What ended a child (its wait status), or nullopt when it finished.
std::optional<std::string> ending_of(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == kFinished) return std::nullopt;
  if (WIFSIGNALED(status)) return fmt::format("ended in signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
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

// Fills the page tables of this process's mappings (its code, libraries, heap and stack, each of
// at most 16 MiB), so that the read it runs next takes no page faults for them: a fresh fork
// faults on every page of code it runs (its parent's mappings of files are not copied) and on
// every page it writes (copy-on-write), at 10-15 us each on a VM's memory, 15-20 ms a read.
// Advice only: kernels before 5.14 refuse it, and the read then faults as before.
void fill_page_tables() {
  constexpr std::uintptr_t kMost = std::uintptr_t{16} << 20;
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return;
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    int name_at = 0;  // the mapped file's path, "[heap]", "[stack]", "[vdso]"..., or nothing
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %*s %n", &lo, &hi, perms, &name_at) != 3) continue;
    const std::string_view name = line + name_at;
    const bool special = name.starts_with("[") && !name.starts_with("[heap]") && !name.starts_with("[stack]");
    if (hi - lo > kMost || perms[0] != 'r' || special) continue;
    const bool writable = perms[1] == 'w' && perms[3] == 'p';
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
  }
  std::fclose(maps);
}

// A request's words: each ended by a zero byte.
std::vector<std::string> words_of(const char* message, std::size_t n) {
  std::vector<std::string> words;
  for (std::size_t at = 0; at < n;) {
    const std::size_t end = std::find(message + at, message + n, '\0') - message;
    words.emplace_back(message + at, end - at);
    at = end + 1;
  }
  return words;
}

// The server's child for the next read, forked before that read is asked for: it fills its page
// tables while the server waits, then runs the one read it is sent (the reader and its arguments)
// and ends; sent nothing (the server ended), it ends.
struct SpareChild {
  pid_t pid = -1;
  int request = -1;  // the server's end of the child's socket
};

SpareChild fork_spare_child(pid_t server,
                            const std::function<int(const std::string&, const std::vector<std::string>&)>& run) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(kServerSocket);
    ::close(pair[0]);
    make_child_quiet_and_mortal(server);
    fill_page_tables();
    std::vector<char> message(kLargestMessage);
    ssize_t n;
    while ((n = ::recv(pair[1], message.data(), message.size(), 0)) < 0 && errno == EINTR) {
    }
    if (n <= 0) _exit(kFinished);
    const std::vector<std::string> words = words_of(message.data(), static_cast<std::size_t>(n));
    _exit(run(words[0], std::vector<std::string>(words.begin() + 1, words.end())));
  }
  ::close(pair[1]);
  if (pid < 0) {
    ::close(pair[0]);
    return {};
  }
  return {pid, pair[0]};
}

// Ends a spare child that was not used, or reaps one that ended.
void drop_spare_child(SpareChild& spare) {
  if (spare.pid < 0) return;
  ::close(spare.request);
  int status;
  ::kill(spare.pid, SIGKILL);
  while (::waitpid(spare.pid, &status, 0) < 0 && errno == EINTR) {
  }
  spare = {};
}

// Sends the read to `spare` (one forked now when there is none or it has ended) and waits for it
// under `limit`: the read's outcome. A spare child that ended while it waited (killed from
// outside) reads nothing and is replaced; it costs the read no verdict.
std::optional<std::string> run_in_spare_child(
    SpareChild& spare, pid_t server, const std::vector<std::string>& words, milliseconds limit,
    const std::function<int(const std::string&, const std::vector<std::string>&)>& run) {
  std::string request;
  for (std::size_t i = 1; i < words.size(); ++i) request += words[i] + '\0';
  for (int attempt = 0; attempt < 2; ++attempt) {
    int status;
    if (spare.pid > 0 && ::waitpid(spare.pid, &status, WNOHANG) != 0) {
      ::close(spare.request);
      spare = {};
    }
    if (spare.pid < 0) spare = fork_spare_child(server, run);
    if (spare.pid < 0) return "could not be started (fork failed)";
    if (::send(spare.request, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
      drop_spare_child(spare);
      continue;
    }
    ::close(spare.request);
    const pid_t pid = spare.pid;
    spare = {};
    return outcome_of(pid, limit);
  }
  return "could not be started (its child did not take the request)";
}

// The server's loop: one request at a time from kServerSocket, each read in a child forked ahead
// of it under its time limit, its outcome sent back (a zero byte: finished), then the next child
// forked. Ends when the socket closes.
int serve_contained_reads(const std::function<int(const std::string&, const std::vector<std::string>&)>& run) {
  const pid_t self = ::getpid();
  std::vector<char> message(kLargestMessage);
  SpareChild spare = fork_spare_child(self, run);
  for (;;) {
    const ssize_t n = ::recv(kServerSocket, message.data(), message.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const std::vector<std::string> words = words_of(message.data(), static_cast<std::size_t>(n));
    std::optional<std::string> outcome = "ended before it started (a malformed request)";
    if (words.size() >= 2)
      outcome = run_in_spare_child(spare, self, words, milliseconds{std::atoll(words[0].c_str())}, run);
    const std::string reply = outcome ? *outcome : std::string(1, '\0');
    if (::send(kServerSocket, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) break;
    if (spare.pid < 0) spare = fork_spare_child(self, run);
  }
  drop_spare_child(spare);
  return 0;
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

bool contained_reads_run_elsewhere() { return !contained_read_program.empty(); }

namespace {

// Starts `words` (the program first) with standard error on /dev/null, default signal actions
// and an empty signal mask; `socket`, when given, becomes its descriptor kServerSocket. Returns
// its pid, or -1.
pid_t spawn_reader(std::vector<std::string> words, int socket = -1) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  // The reader multiplies no matrices: OpenBLAS would start a thread per core, and the server
  // forks, which is only clean in a process of one thread.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0) env.push_back(*e);
  std::string one_thread = "OPENBLAS_NUM_THREADS=1";
  env.push_back(one_thread.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  if (posix_spawn_file_actions_init(&actions) != 0) return -1;
  posix_spawnattr_init(&attributes);
  // Its messages would repeat the caller's, which reports the outcome once, naming the file.
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  if (socket >= 0) posix_spawn_file_actions_adddup2(&actions, socket, kServerSocket);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  return rc == 0 ? pid : -1;
}

// A request to the server: its time limit, the reader and its arguments, each ended by a zero
// byte, in one message.
std::string request_of(const ContainedRead& read, milliseconds time_limit) {
  std::string message = std::to_string(time_limit.count()) + '\0' + read.reader + '\0';
  for (const std::string& a : read.args) message += a + '\0';
  return message;
}

// The server of contained reads this process started (one, on first use): a fresh process of
// the program that forks a child for each read. A fork of that small process costs a few
// milliseconds where starting the program costs tens (its libraries loaded, relocated and
// faulted in: 35-50 ms a read here), and the child is as separate from this process as a
// spawned one. Not started, or gone: reads are spawned one by one as before.
class ReadServer {
 public:
  void start_now() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_ && socket_ < 0) start();
  }

  // The read's outcome as crash_in_child returns it; nullopt when the server cannot answer.
  std::optional<std::optional<std::string>> run(const ContainedRead& read, milliseconds time_limit) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || (socket_ < 0 && !start())) return std::nullopt;
    const std::string request = request_of(read, time_limit);
    if (request.size() > kLargestMessage || ::send(socket_, request.data(), request.size(), MSG_NOSIGNAL) < 0)
      return give_up();
    // The server stops the read at its limit and answers; a margin for the server itself.
    pollfd p{socket_, POLLIN, 0};
    const auto wait = time_limit + std::chrono::seconds(10);
    int ready;
    while ((ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(wait.count(), 1 << 30)))) < 0 &&
           errno == EINTR) {
    }
    if (ready <= 0) return give_up();
    char reply[1024];
    const ssize_t n = ::recv(socket_, reply, sizeof reply, 0);
    if (n <= 0) return give_up();  // the server ended
    if (n == 1 && reply[0] == '\0') return std::optional<std::string>{};
    return std::optional<std::string>{std::string(reply, static_cast<std::size_t>(n))};
  }

  ~ReadServer() {
    if (socket_ >= 0) ::close(socket_);  // the server sees the end and exits
    if (pid_ > 0) {
      int status;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }

 private:
  bool start() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      failed_ = true;
      return false;
    }
    if (pair[1] == kServerSocket) {  // a dup2 onto itself would leave it close-on-exec
      const int moved = ::fcntl(pair[1], F_DUPFD_CLOEXEC, kServerSocket + 1);
      ::close(pair[1]);
      pair[1] = moved;
    }
    pid_ = spawn_reader({contained_read_program, kContainedReadServerFlag, std::to_string(::getpid())}, pair[1]);
    ::close(pair[1]);
    if (pid_ < 0) {
      ::close(pair[0]);
      failed_ = true;
      return false;
    }
    socket_ = pair[0];
    return true;
  }

  std::nullopt_t give_up() {
    failed_ = true;
    ::close(socket_);
    socket_ = -1;
    int status;
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return std::nullopt;
  }

  std::mutex mutex_;
  int socket_ = -1;
  pid_t pid_ = -1;
  bool failed_ = false;
};

ReadServer& read_server() {
  static ReadServer server;
  return server;
}

}  // namespace

void start_contained_read_server() {
  if (!contained_read_program.empty()) read_server().start_now();
}

std::optional<std::string> crash_in_child(const ContainedRead& read, milliseconds time_limit) {
  if (contained_read_program.empty()) return crash_in_child(read.in_process, time_limit);
  if (auto answer = read_server().run(read, time_limit)) return *answer;
  std::vector<std::string> words{contained_read_program, kContainedReadFlag, std::to_string(::getpid()), read.reader};
  words.insert(words.end(), read.args.begin(), read.args.end());
  const pid_t pid = spawn_reader(std::move(words));
  if (pid < 0) return crash_in_child(read.in_process, time_limit);  // the program is gone: fork instead
  return outcome_of(pid, time_limit);
}

int contained_read_child(int argc, char** argv,
                         const std::function<int(const std::string&, const std::vector<std::string>&)>& run) {
  if (argc < 3) return 2;
  make_child_quiet_and_mortal(static_cast<pid_t>(std::atoll(argv[2])));
  if (std::string_view(argv[1]) == kContainedReadServerFlag) return serve_contained_reads(run);
  if (argc < 4) return 2;
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
