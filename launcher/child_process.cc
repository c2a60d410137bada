#include "launcher/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>

#include "launcher/preempt_signals.h"

namespace slurm_train {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::string resolve_program(const std::string& program, const std::string& path) {
  if (program.empty()) throw ProgramNotRunnable("the program is an empty string", 127);
  if (program.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0)
      throw ProgramNotRunnable(fmt::format("program '{}' not found: {}", program, std::strerror(errno)), 127);
    if (S_ISDIR(st.st_mode)) throw ProgramNotRunnable(fmt::format("program '{}' is a directory", program), 126);
    if (!is_executable_file(program))
      throw ProgramNotRunnable(fmt::format("program '{}' is not executable (chmod +x it, or run it through its "
                                           "interpreter: python3 {})",
                                           program, program),
                               126);
    return program;
  }
  bool found_not_executable = false;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t colon = std::min(path.find(':', at), path.size());
    // An empty entry is the current folder, as for execvp.
    const std::string candidate = (colon == at ? std::string(".") : path.substr(at, colon - at)) + "/" + program;
    at = colon + 1;
    if (is_executable_file(candidate)) return candidate;
    if (::access(candidate.c_str(), F_OK) == 0) found_not_executable = true;
  }
  if (found_not_executable)
    throw ProgramNotRunnable(fmt::format("program '{}' is on PATH but not executable", program), 126);
  throw ProgramNotRunnable(fmt::format("program '{}' not found on PATH ({})", program, path.empty() ? "empty" : path),
                           127);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string text = fmt::format("was killed by signal {} ({})", sig, signal_name(sig));
    if (sig == SIGKILL) text += ": by someone, or by the out-of-memory killer";
    if (WCOREDUMP(status)) text += ", core dumped";
    return text;
  }
  return fmt::format("ended with wait status {:#x}", status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const Environment& env) {
  if (argv.empty()) throw ProgramNotRunnable("no program to run", 127);
  const std::string program = resolve_program(argv[0], env_value(env, "PATH"));
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_text;
  for (const auto& [key, value] : env) env_text.push_back(key + "=" + value);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  int report[2];  // the child writes errno here when execve fails; closed by a successful exec
  if (::pipe2(out_, O_CLOEXEC) != 0 || ::pipe2(err_, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("exec: pipe2: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int e = errno;
    for (int* fd : {&out_[0], &out_[1], &err_[0], &err_[1], &report[0], &report[1]}) close_fd(*fd);
    throw std::runtime_error(fmt::format("exec: fork: {}", std::strerror(e)));
  }
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the supervisor died before the prctl
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(out_[1], STDOUT_FILENO);
    ::dup2(err_[1], STDERR_FILENO);
    ::execve(program.c_str(), args.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] const auto n = ::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here: a signal to the group must not miss a child not yet in it
  close_fd(out_[1]);
  close_fd(err_[1]);
  close_fd(report[1]);
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(report[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  close_fd(report[0]);
  if (n == sizeof child_errno) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    close_fd(out_[0]);
    close_fd(err_[0]);
    throw ProgramNotRunnable(fmt::format("cannot run '{}': execve: {}", program, std::strerror(child_errno)),
                             child_errno == ENOENT ? 127 : 126);
  }
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) {
    const int e = errno;
    end(0);
    throw std::runtime_error(fmt::format("exec: pidfd_open({}): {}", pid_, std::strerror(e)));
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    end(0);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int* fd : {&out_[0], &err_[0], &pidfd_}) close_fd(*fd);
}

void ChildProcess::close_stdout() { close_fd(out_[0]); }
void ChildProcess::close_stderr() { close_fd(err_[0]); }

void ChildProcess::signal(int sig) noexcept {
  if (pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0);
}

std::optional<int> ChildProcess::try_wait() noexcept {
  if (reaped_) return std::nullopt;
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r != pid_) return std::nullopt;
  reaped_ = true;
  return status;
}

void ChildProcess::end(double grace_seconds) noexcept {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  signal(SIGTERM);
  if (grace_seconds > 0 && pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const int r = ::poll(&p, 1, static_cast<int>(std::max<long>(1, left.count())));
      if (r == 1) break;
      if (r < 0 && errno != EINTR) break;
    }
  }
  ::kill(-pid_, SIGKILL);
}

}  // namespace slurm_train
