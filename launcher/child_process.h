// The program `slurm-train exec` supervises: started with its own environment, in its own
// process group (so that its helpers, such as data-loader workers, end with it), with stdout and
// stderr on pipes, and killed by the kernel if the supervisor dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "spank/jobenv/environment.h"

namespace slurm_train {

// The program cannot be started. exit_code: 127 not found, 126 found but not executable (the
// shell's convention, which job scripts already test for).
struct ProgramNotRunnable : std::runtime_error {
  ProgramNotRunnable(const std::string& message, int code) : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

// argv[0] as execvp finds it: a name with a '/' as it is, else the first executable file of
// that name on `path`. Throws ProgramNotRunnable naming the program and what was searched.
std::string resolve_program(const std::string& program, const std::string& path);

// "exited with status 3", "was killed by signal 9 (SIGKILL)", from a wait status.
std::string describe_wait_status(int status);
// The exit code a shell gives for a wait status: the status, or 128 + the signal.
int exit_code_of(int status);

class ChildProcess {
 public:
  // Starts argv (argv[0] resolved on the environment's PATH) with exactly `env` as its
  // environment and every signal unblocked. Throws ProgramNotRunnable, or std::runtime_error
  // naming the failing call.
  ChildProcess(const std::vector<std::string>& argv, const Environment& env);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }  // readable once the program has exited
  int stdout_fd() const { return out_[0]; }
  int stderr_fd() const { return err_[0]; }
  void close_stdout();
  void close_stderr();

  // To the program alone (a preemption signal is the program's to handle, not its workers').
  void signal(int sig) noexcept;
  // Reaps the program when it has exited: its wait status, or nullopt while it runs.
  std::optional<int> try_wait() noexcept;
  // SIGTERM to the program's process group, then SIGKILL once `grace_seconds` have passed
  // without it exiting. Safe from any thread; does not reap.
  void end(double grace_seconds) noexcept;

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_[2] = {-1, -1}, err_[2] = {-1, -1};
  bool reaped_ = false;
};

}  // namespace slurm_train
