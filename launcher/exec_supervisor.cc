#include "launcher/exec_supervisor.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "launcher/child_process.h"
#include "launcher/cli_validators.h"
#include "launcher/exit_codes.h"
#include "launcher/gpu_monitor.h"
#include "launcher/gpu_telemetry.h"
#include "launcher/heartbeat_compute.h"
#include "launcher/heartbeat_file.h"
#include "launcher/job_energy.h"
#include "launcher/memory_cgroup.h"
#include "launcher/munge_auth.h"
#include "launcher/output_relay.h"
#include "launcher/preempt_signals.h"
#include "launcher/program_message.h"
#include "launcher/program_pipe.h"
#include "launcher/rank_log.h"
#include "launcher/requeue.h"
#include "launcher/restart_env.h"
#include "launcher/restart_record.h"
#include "launcher/step_report.h"
#include "launcher/watchdog.h"
#include "spank/jobenv/env_names.h"
#include "spank/jobenv/host.h"
#include "spank/jobenv/hostlist.h"
#include "spank/jobenv/rendezvous.h"
#include "spank/jobenv/task_facts.h"
#include "spank/jobenv/text.h"
#include "train/io/durable_file.h"
#include "train/io/write_all.h"
#include "train/loop/metrics.h"
#include "train/loop/prometheus.h"
#include "train/loop/tensorboard_writer.h"

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;

// Slurm's preemption warning (sbatch --signal) is one of these in practice, and SIGTERM comes
// before a preemption or a cancel.
constexpr int kPreemptionSignals[] = {SIGUSR1, SIGUSR2, SIGTERM};
// Forwarded to the program as they are, without meaning preemption.
constexpr int kForwardedSignals[] = {SIGINT, SIGHUP, SIGQUIT};

bool is_preemption(int sig) {
  for (const int s : kPreemptionSignals)
    if (s == sig) return true;
  return false;
}

// Where this task stands: a task of a Slurm job step, or a program run alone (one rank).
struct ExecTask {
  TaskFacts facts;
  bool in_step = false;
  std::string job;  // the log folder's name
};

ExecTask this_task(const Environment& env) {
  ExecTask t;
  // srun sets SLURM_STEP_NUM_TASKS in a step's tasks; a batch script's own shell has only the
  // job's SLURM_NTASKS, which is not its own task count.
  t.in_step = !env_value(env, "SLURM_STEP_NUM_TASKS").empty() && !env_value(env, "SLURM_PROCID").empty();
  if (t.in_step) t.facts = task_facts_from_env(env);
  t.job = log_job_id(env);
  if (t.job.empty()) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    t.job = fmt::format("local-{}-{}", stamp, ::getpid());
  }
  return t;
}

// A port no one listens on now, for MASTER_PORT of a program run alone.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 29500;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  socklen_t len = sizeof sa;
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

// The rendezvous variables: the plugin's when it exported them for this task; otherwise the same
// values from the same code, or those of a job of one rank.
void add_rendezvous(Environment& child, const Environment& env, const ExecTask& task) {
  if (!env_value(env, env_names::kPlugin).empty() && env_value(env, env_names::kEnv) == "on" &&
      !env_value(env, env_names::kMasterAddr).empty())
    return;
  if (task.in_step) {
    for (auto& [key, value] : rendezvous_variables(task.facts, PortRange{})) child[key] = value;
    return;
  }
  child[env_names::kRank] = "0";
  child[env_names::kLocalRank] = "0";
  child[env_names::kWorldSize] = "1";
  child[env_names::kLocalWorldSize] = "1";
  child[env_names::kNodeRank] = "0";
  child[env_names::kMasterAddr] = "127.0.0.1";
  child[env_names::kMasterPort] = std::to_string(free_port());
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The supervisor of one task: its program, the watchdog, the log, the signals.
class Supervisor {
 public:
  Supervisor(const ExecOptions& options, const Environment& env, const ExecTask& task)
      : o_(options),
        env_(env),
        task_(task),
        rank_(static_cast<int>(task.facts.global_rank)),
        size_(task.in_step ? static_cast<int>(task.facts.world_size) : 1),
        host_(host_name()) {}

  int run();

 private:
  int usage(const std::string& message);
  void start_watchdog();
  int supervise();
  int finished_normally();
  // `mine`: this rank's energy where it was read already (own_energy()).
  int preempted(std::optional<RankEnergy> mine = std::nullopt);
  int failed(int status);
  void take_heartbeat(TrainProgress& progress);
  void take_program_lines(TrainProgress& progress);
  void take_program_message(std::string_view line, TrainProgress& progress);
  void write_program_prometheus(bool now);
  void write_gpu_line(std::uint64_t step, bool now);
  RankEnergy own_energy();
  void report_energy(const RankEnergy& mine);
  std::string who() const { return fmt::format("rank {} of {} on {}", rank_, size_, host_); }
  void say(const std::string& text) {  // rank 0's console and this rank's log
    log_.line(text);
    if (rank_ == 0) write_all(2, "slurm-train exec: " + text + "\n");
  }

  const ExecOptions& o_;
  const Environment& env_;
  const ExecTask& task_;
  const int rank_, size_;
  const std::string host_;
  const Clock::time_point started_ = Clock::now();
  int forward_signal_ = 0;
  int signal_fd_ = -1;
  RankLog log_;
  std::unique_ptr<HeartbeatFile> heartbeat_;
  std::unique_ptr<ProgramPipe> pipe_;         // the program's lines (the Python helper's heartbeat metrics, done())
  std::unique_ptr<MetricsWriter> metrics_;    // rank 0's --metrics file
  std::unique_ptr<TensorboardWriter> board_;  // rank 0's --tensorboard folder
  // A requeued or restarted job's program resumes from its own checkpoint: its first figures'
  // step goes to the board as a restart mark, so that TensorBoard drops what the earlier run
  // wrote from that step on (tensorboard_writer.h).
  bool board_restart_unmarked_ = false;
  std::optional<ProgramMetrics> program_figures_;  // the newest, for rank 0's --prometheus file
  Clock::time_point prometheus_written_{};
  std::optional<Clock::time_point> gpu_line_written_;  // rank 0's newest "gpu" line in --metrics
  // The program's first reported step, and its GPUs' energy counters then (job_energy.h).
  std::optional<std::uint64_t> first_step_;
  std::vector<GpuSample> gpus_at_first_step_;
  bool program_figures_unwritten_ = false;
  bool program_done_ = false;
  std::uint64_t bad_program_lines_ = 0;
  HeartbeatCompute compute_;
  std::unique_ptr<ChildProcess> child_;
  std::atomic<ChildProcess*> child_to_end_{nullptr};
  std::unique_ptr<GpuMonitor> gpus_;  // the GPUs given to the task, sampled on a thread (outlives the watchdog)
  std::unique_ptr<Watchdog> watchdog_;
  RestartEnv restart_;
  std::unique_ptr<StepReport> report_;  // rank 0's outcome for the in-job supervisor
  bool started_reported_ = false;
  bool connected_reported_ = false;
  std::optional<OutputRelay> relay_;
  int preempted_by_ = 0;
  std::uint64_t exited_at_ms_ = 0;                   // when the program ended (Unix ms): the first failure is the cause
  std::optional<std::uint64_t> oom_kills_at_start_;  // of this task's memory cgroup
};

int Supervisor::run() {
  try {
    restart_ = restart_env_of(env_);
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  report_ = std::make_unique<StepReport>(rank_ == 0 ? restart_.report_path : std::string());
  if (!o_.preempt_signal.empty()) {
    try {
      const auto list = parse_signal_list(o_.preempt_signal);
      if (list.size() != 1)
        throw std::invalid_argument(fmt::format("--preempt-signal '{}': expected one signal", o_.preempt_signal));
      forward_signal_ = list[0];
    } catch (const std::invalid_argument& e) {
      return usage(e.what());
    }
  }
  // A rank that cannot start says so at once, and through the watchdog ends the others, which
  // would otherwise wait for it (every rank that finds the same says it too).
  std::optional<std::pair<std::string, int>> cannot_start;
  if (!o_.log_dir.empty()) {
    try {
      log_.open(fmt::format("{}/{}/rank-{}.log", o_.log_dir, task_.job, rank_), rank_);
    } catch (const std::runtime_error& e) {
      cannot_start.emplace(fmt::format("--log-dir: {}", e.what()), kExitUsage);
    }
  }
  if (!cannot_start) {
    try {
      resolve_program(o_.command[0], env_value(env_, "PATH"));
    } catch (const ProgramNotRunnable& e) {
      cannot_start.emplace(e.what(), e.exit_code);
    }
  }
  // Rank 0's files of the program's figures: one that cannot be opened is an error before the
  // program starts, not a surprise after hours of training.
  if (!cannot_start && rank_ == 0) {
    try {
      if (!o_.metrics.empty())
        metrics_ = std::make_unique<MetricsWriter>(metrics_path_for_job(o_.metrics, task_.job), task_.job);
      if (!o_.tensorboard.empty()) {
        board_ = std::make_unique<TensorboardWriter>(metrics_path_for_job(o_.tensorboard, task_.job));
        const std::string requeues = env_value(env_, "SLURM_RESTART_COUNT");
        board_restart_unmarked_ = restart_.count > 0 || (!requeues.empty() && requeues != "0");
      }
    } catch (const std::exception& e) {
      cannot_start.emplace(
          fmt::format("{} {}", o_.metrics.empty() || metrics_ ? "--tensorboard:" : "--metrics:", e.what()), kExitUsage);
    }
  }
  if (cannot_start) {
    write_all(2, fmt::format("slurm-train: error: {}: {}\n", who(), cannot_start->first));
    log_.line(fmt::format("error: {}", cannot_start->first));
  }
  // A console that went away (srun killed) must not kill the supervisor before it has ended its
  // program; the program gets the default action back (child_process.cc).
  ::signal(SIGPIPE, SIG_IGN);
  // Blocked in every thread (the watchdog's is started after this) and read from a signalfd: the
  // supervisor decides what a signal means, and the program gets them unblocked.
  sigset_t signals;
  sigemptyset(&signals);
  for (const int s : kPreemptionSignals) sigaddset(&signals, s);
  for (const int s : kForwardedSignals) sigaddset(&signals, s);
  if (::pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0 ||
      (signal_fd_ = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
    write_all(2, fmt::format("slurm-train: error: {}: signalfd: {}\n", who(), std::strerror(errno)));
    return kExitFailed;
  }
  try {
    const std::string tmp = env_value(env_, "TMPDIR");
    heartbeat_ = std::make_unique<HeartbeatFile>(fmt::format(
        "{}/slurm-train-heartbeat.{}.{}.{}.", tmp.empty() ? "/tmp" : tmp, task_.job, task_.facts.step_id, rank_));
    pipe_ = std::make_unique<ProgramPipe>(fmt::format("{}/slurm-train-pipe.{}.{}.{}.", tmp.empty() ? "/tmp" : tmp,
                                                      task_.job, task_.facts.step_id, rank_));
    start_watchdog();
  } catch (const std::exception& e) {
    write_all(2, fmt::format("slurm-train: error: {}: {}\n", who(), e.what()));
    log_.line(fmt::format("error: {}", e.what()));
    return kExitFailed;
  }
  if (cannot_start) {
    // Rank 0 lets every rank connect first, so that none is left waiting to reach it.
    watchdog_->wait_for_all_ranks(10);
    watchdog_->report_failure(kExitFailed, "cannot start: " + cannot_start->first);
    return cannot_start->second;
  }
  return supervise();
}

int Supervisor::usage(const std::string& message) {
  write_all(2, fmt::format("slurm-train: error: {}\n", message));
  return kExitUsage;
}

void Supervisor::start_watchdog() {
  const PrometheusLabels job = prometheus_labels(env_);
  gpus_ = start_gpu_monitor(env_, GpuSeriesLabels{job.job_id, job.job_name, rank_, host_},
                            rank_prometheus_path(o_.prometheus, rank_), [this](const std::string& line) {
                              log_.line(line);
                              write_all(2, "slurm-train exec: " + line + "\n");
                            });
  WatchdogOptions options;
  options.gpu_fault = [this] { return gpus_ ? gpu_fault_summary(gpus_->latest()) : std::string(); };
  options.gpu_reading = [this] { return gpus_ ? gpu_reading(gpus_->latest()) : std::nullopt; };
  options.hang_timeout = o_.hang_timeout;
  options.connect_timeout = 120;
  options.print_reported_failures = true;
  options.gather_failures_seconds = 1;
  options.straggler_threshold = o_.straggler_threshold;
  options.on_verdict = [this](const StepOutcome& verdict) { report_->ended(verdict); };
  options.on_root_verdict = [path = restart_.report_path](const StepOutcome& verdict) {
    StepReport(path).ended(verdict);
  };
  options.before_exit = [this] {
    if (ChildProcess* child = child_to_end_.load()) {
      log_.line(fmt::format("ending the program (pid {}): SIGTERM, then SIGKILL after {:.0f} s", child->pid(),
                            o_.kill_grace));
      child->end(o_.kill_grace);
    }
    heartbeat_->remove();  // _exit skips its destructor
    pipe_->remove();
  };
  std::string device = env_value(env_, "CUDA_VISIBLE_DEVICES");
  const RankIdentity me{host_, static_cast<int>(::getpid()), allowed_cpus(), device.empty() ? "-" : "gpu " + device};
  WatchdogRendezvous where;
  where.rank = rank_;
  where.size = size_;
  std::unique_ptr<ControlAuth> auth;
  if (task_.in_step && size_ > 1) {
    where.root_host = master_addr(task_.facts.step_nodelist);
    where.port = control_port(task_.facts.job_id, task_.facts.step_id, PortRange{});
    // Anyone can compute the port from squeue: a munge credential proves a task is the job's.
    // Task 0 checks munged first, so that a dead one is named before any rank knocks.
    auth = std::make_unique<MungeAuth>(task_.facts.job_id, task_.facts.step_id, munge_socket_for(env_), rank_ == 0);
  }
  watchdog_ = std::make_unique<Watchdog>(where, std::move(auth), me, options, log_);
}

int Supervisor::supervise() {
  Environment child_env = env_;
  add_rendezvous(child_env, env_, task_);
  child_env["SLURM_TRAIN_HEARTBEAT"] = heartbeat_->path();
  child_env["SLURM_TRAIN_PROGRAM_PIPE"] = pipe_->path();
  try {
    child_ = std::make_unique<ChildProcess>(o_.command, child_env);
  } catch (const ProgramNotRunnable& e) {
    write_all(2, fmt::format("slurm-train: error: {}: {}\n", who(), e.what()));
    watchdog_->wait_for_all_ranks(10);
    watchdog_->report_failure(kExitFailed, fmt::format("cannot start: {}", e.what()));
    return e.exit_code;
  }
  child_to_end_ = child_.get();
  oom_kills_at_start_ = oom_kills();
  watchdog_->set_pid(child_->pid());
  std::string line;
  for (const auto& a : o_.command) line += (line.empty() ? "" : " ") + a;
  log_.line(fmt::format("slurm-train {} exec: rank {} of {} on {}: started {} (pid {}), supervisor pid {}",
                        SLURM_TRAIN_VERSION, rank_, size_, host_, line, child_->pid(), ::getpid()));
  if (rank_ == 0 && task_.in_step)
    write_all(2, fmt::format("slurm-train exec: job {}: {} rank(s); rank logs in {}\n", task_.job, size_,
                             o_.log_dir.empty() ? "(none: --log-dir is empty)" : o_.log_dir + "/" + task_.job + "/"));
  relay_.emplace(log_, rank_, [](OutputRelay::Stream s, std::string_view bytes) {
    write_all(s == OutputRelay::Stream::kStdout ? 1 : 2, bytes);
  });
  TrainProgress& progress = watchdog_->progress();
  progress.set(TrainPhase::kProgram, 0);

  std::optional<int> status;
  std::optional<Clock::time_point> preempt_deadline, exited_at;
  bool killed = false;
  char buffer[65536];
  for (;;) {
    pollfd fds[5] = {{child_->stdout_fd(), POLLIN, 0},
                     {child_->stderr_fd(), POLLIN, 0},
                     {signal_fd_, POLLIN, 0},
                     {status ? -1 : child_->pidfd(), POLLIN, 0},
                     {pipe_->fd(), POLLIN, 0}};
    if (::poll(fds, 5, 200) < 0 && errno != EINTR) break;
    if (fds[4].revents & POLLIN) take_program_lines(progress);
    write_program_prometheus(false);
    write_gpu_line(progress.step(), false);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        relay_->take(i == 0 ? OutputRelay::Stream::kStdout : OutputRelay::Stream::kStderr,
                     std::string_view(buffer, static_cast<std::size_t>(n)));
        progress.set(TrainPhase::kProgram, progress.step());
      } else if (n == 0 || errno != EINTR) {
        i == 0 ? child_->close_stdout() : child_->close_stderr();
      }
    }
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (status) continue;
      const int to_program = is_preemption(sig) && forward_signal_ != 0 ? forward_signal_ : sig;
      if (is_preemption(sig) && preempted_by_ == 0) {
        preempted_by_ = sig;
        preempt_deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.preempt_grace));
        say(
            fmt::format("received {}: passed to the program (pid {}) as {}; waiting up to {:.0f} s "
                        "(--preempt-grace) for it to checkpoint and exit",
                        signal_name(sig), child_->pid(), signal_name(to_program), o_.preempt_grace));
      } else {
        log_.line(fmt::format("received {}: passed to the program as {}", signal_name(sig), signal_name(to_program)));
      }
      child_->signal(to_program);
    }
    if (!connected_reported_ && watchdog_->all_connected()) report_->connected(), connected_reported_ = true;
    if (heartbeat_->changed()) {
      take_heartbeat(progress);
      // The program's first heartbeat: where it (re)started, for the in-job supervisor.
      if (!started_reported_) report_->started(progress.step()), started_reported_ = true;
    }
    if (!status) {
      status = child_->try_wait();
      if (status) {
        exited_at = Clock::now();
        exited_at_ms_ = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
      }
    }
    if (status && child_->stdout_fd() < 0 && child_->stderr_fd() < 0) break;
    // Its own children may hold the pipes open after it exited.
    if (status && Clock::now() - *exited_at > std::chrono::seconds(2)) break;
    if (!status && preempt_deadline && !killed && Clock::now() > *preempt_deadline) {
      say(fmt::format("the program (pid {}) did not exit within --preempt-grace={:.0f} s of {}; ending it",
                      child_->pid(), o_.preempt_grace, signal_name(preempted_by_)));
      child_->end(o_.kill_grace);
      killed = true;
    }
  }
  relay_->flush();
  if (!status) {
    write_all(2, fmt::format("slurm-train: error: {}: poll: {}\n", who(), std::strerror(errno)));
    watchdog_->report_failure(kExitFailed, fmt::format("{}: the supervisor failed (poll)", who()));
    return kExitFailed;
  }
  if (heartbeat_->changed()) take_heartbeat(progress);
  take_program_lines(progress);
  write_program_prometheus(true);
  write_gpu_line(progress.step(), true);
  log_.line(fmt::format("the program (pid {}) {}", child_->pid(), describe_wait_status(*status)));
  if (preempted_by_ != 0) return preempted();
  if (exit_code_of(*status) == 0) return finished_normally();
  return failed(*status);
}

// A changed heartbeat: its step is progress, and its compute seconds (or pace) go to the straggler
// judge as `run`'s steps do.
void Supervisor::take_heartbeat(TrainProgress& progress) {
  const std::optional<std::uint64_t> step = heartbeat_->step();
  progress.set(TrainPhase::kProgram, step.value_or(progress.step()));
  if (!step) return;
  const double now = std::chrono::duration<double>(Clock::now() - started_).count();
  const StepCompute c = compute_.observe(now, *step, heartbeat_->compute_seconds());
  if (c.steps > 0) progress.add_compute(c.seconds_per_step, c.steps);
  if (!first_step_) {
    first_step_ = *step;
    if (gpus_) gpus_at_first_step_ = gpus_->sample_now();
  }
}

// This rank's GPU energy from its program's first reported step to now (its exit), read from the
// counters rather than integrated from the power, as `run` does.
RankEnergy Supervisor::own_energy() {
  RankEnergy e{rank_, gpus_ != nullptr, std::nullopt, 0};
  const std::optional<std::uint64_t> last = heartbeat_->step();
  if (first_step_ && last && *last > *first_step_) e.steps = *last - *first_step_;
  if (gpus_ && e.steps > 0) e.joules = gpu_energy_between(gpus_at_first_step_, gpus_->sample_now());
  return e;
}

// Rank 0, once every rank has said bye: the job's energy in the metrics file, the log and on the
// console, as `run`'s final line gives it.
void Supervisor::report_energy(const RankEnergy& mine) {
  std::vector<RankEnergy> ranks = watchdog_->member_energies();
  ranks.insert(ranks.begin(), mine);
  const bool tokens = o_.tokens_per_step > 0;
  const std::optional<RunEnergy> e =
      job_energy(ranks, mine.steps, static_cast<double>(tokens ? o_.tokens_per_step : o_.samples_per_step),
                 tokens ? "token" : "sample");
  if (!e) return;
  if (metrics_) metrics_->write_energy(*e);
  say(fmt::format("GPU energy {:.0f} J over {} steps, {:.3g} J/step{}", e->joules, e->steps, e->per_step,
                  e->unit.empty() ? "" : fmt::format(", {:.3g} J/{}", e->per_unit, e->unit)));
}

void Supervisor::take_program_lines(TrainProgress& progress) {
  pipe_->read_lines([&](std::string_view line) { take_program_message(line, progress); },
                    [&](std::size_t bytes) {
                      if (bad_program_lines_++ == 0)
                        say(
                            fmt::format("the program wrote a line of {} bytes to $SLURM_TRAIN_PROGRAM_PIPE (at most "
                                        "{}): ignored, as any other bad line will be",
                                        bytes, kMaxProgramLine));
                    });
}

// A line from the program: its figures go to rank 0's metrics and Prometheus files; done() is
// remembered. A bad line is named once and ignored: the program's training goes on.
void Supervisor::take_program_message(std::string_view line, TrainProgress& progress) {
  ProgramMessage message;
  try {
    message = parse_program_message(line);
  } catch (const std::invalid_argument& e) {
    if (bad_program_lines_++ == 0)
      say(
          fmt::format("a line the program wrote to $SLURM_TRAIN_PROGRAM_PIPE is not understood: {}; ignored, as any "
                      "other bad line will be",
                      e.what()));
    return;
  }
  if (std::holds_alternative<ProgramDone>(message)) {
    if (!program_done_)
      log_.line("the program says it is done (slurm_train.done()): a preemption from now on does not requeue the job");
    program_done_ = true;
    return;
  }
  ProgramMetrics& figures = std::get<ProgramMetrics>(message);
  progress.set(TrainPhase::kProgram, std::max<std::uint64_t>(progress.step(), figures.step));
  if (rank_ != 0) return;
  if (metrics_ && !figures.values.empty()) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    try {
      metrics_->write_program(figures.step, now, figures.values);
    } catch (const std::runtime_error& e) {
      say(fmt::format("{}: no more of the program's figures go there", e.what()));
      metrics_.reset();
    }
  }
  if (board_ && !figures.values.empty()) {
    std::vector<std::pair<std::string, float>> scalars;
    for (const auto& [name, value] : figures.values) scalars.emplace_back(name, static_cast<float>(value));
    try {
      if (board_restart_unmarked_) board_->session_start(static_cast<std::int64_t>(figures.step));
      board_restart_unmarked_ = false;
      board_->scalars(static_cast<std::int64_t>(figures.step), scalars);
      board_->flush();
    } catch (const std::exception& e) {
      say(fmt::format("--tensorboard: {}: no more of the program's figures go there", e.what()));
      board_.reset();
    }
  }
  program_figures_ = std::move(figures);
  program_figures_unwritten_ = true;
}

// Rank 0's --prometheus FILE, the program's newest figures: at most once a second (a durable
// replace costs an fsync), and at the end.
void Supervisor::write_program_prometheus(bool now) {
  if (rank_ != 0 || o_.prometheus.empty() || !program_figures_unwritten_) return;
  if (!now && Clock::now() - prometheus_written_ < std::chrono::seconds(1)) return;
  PrometheusLabels labels = prometheus_labels(env_);
  labels.world_size = size_;
  try {
    write_file_durably(o_.prometheus,
                       program_prometheus_text(labels, program_figures_->step, program_figures_->values));
  } catch (const std::exception& e) {
    say(fmt::format("--prometheus: {}", e.what()));
  }
  prometheus_written_ = Clock::now();
  program_figures_unwritten_ = false;
}

// Rank 0's --metrics file: every rank's GPUs (its own reading and those the others' beats
// brought), as often as the monitors sample them, and at the end.
void Supervisor::write_gpu_line(std::uint64_t step, bool now) {
  if (rank_ != 0 || !metrics_) return;
  if (!now && gpu_line_written_ &&
      Clock::now() - *gpu_line_written_ < std::chrono::duration<double>(gpu_sample_seconds()))
    return;
  const std::optional<GpuReading> mine = gpus_ ? gpu_reading(gpus_->latest()) : std::nullopt;
  std::vector<RankGpuReading> ranks;
  if (mine) ranks.push_back({0, mine->utilization_percent, mine->power_watts});
  for (const RankGpuReading& r : watchdog_->member_gpu_readings()) ranks.push_back(r);
  if (ranks.empty()) return;
  try {
    metrics_->write_gpu(step, mine, ranks);
  } catch (const std::runtime_error& e) {
    say(fmt::format("{}: no more figures go there", e.what()));
    metrics_.reset();
  }
  gpu_line_written_ = Clock::now();
}

int Supervisor::finished_normally() {
  if (rank_ != 0) {
    const int code = watchdog_->finish_and_wait_for_rank0(kExitOk, own_energy());
    log_.line(fmt::format("done (exit {})", code));
    return code;
  }
  const RankEnergy mine = own_energy();
  const auto table = watchdog_->wait_for_all_finished();
  for (const auto& r : table)
    if (r.exit_code == kExitPreempted) return preempted(mine);
  report_energy(mine);
  StepOutcome verdict = step_verdict(kExitOk, "the program exited 0 on every rank", watchdog_->progress().step());
  verdict.stragglers = watchdog_->straggler_hosts();
  report_->ended(verdict);
  watchdog_->finish(kExitOk);
  log_.line("done (exit 0)");
  return kExitOk;
}

// After a preemption signal: every rank's program has exited (the others waited for rank 0's
// word); rank 0 keeps the restart record, decides, tells the others, and requeues the job.
int Supervisor::preempted(std::optional<RankEnergy> mine) {
  if (!mine) mine = own_energy();
  if (rank_ != 0) {
    const int code = watchdog_->finish_and_wait_for_rank0(kExitPreempted, mine);
    log_.line(fmt::format("preempted: exit {}", code));
    return code;
  }
  watchdog_->wait_for_all_finished();
  report_energy(*mine);
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  const std::optional<std::uint64_t> step = heartbeat_->step();
  const std::string signal = preempted_by_ != 0 ? signal_name(preempted_by_) : "a preemption signal on another rank";
  const std::string reached = step ? fmt::format("its program reported step {}", *step)
                                   : fmt::format("its program ran {:.0f} s and reported no step", seconds);
  int code = kExitPreempted;
  std::string detail;
  RequeueResult target{false, ""};
  if (program_done_) {
    code = kExitOk;
    detail = "not requeued: the program had said it was done (slurm_train.done())";
  } else if (const TrustedFolder* records = log_.folder()) {
    const std::string& dir = records->path();
    try {
      const RestartRecord record = next_exec_record(read_restart_record(*records), step, seconds);
      write_restart_record(*records, record);
      if (should_give_up(record, static_cast<std::uint64_t>(o_.max_restarts_without_progress))) {
        code = kExitDoNotRequeue;
        detail = fmt::format(
            "not requeued: {} runs in a row made no progress (more than "
            "--max-restarts-without-progress={}); delete {}/restarts to allow it again",
            record.restarts_without_progress, o_.max_restarts_without_progress, dir);
      }
    } catch (const std::exception& e) {
      detail = fmt::format("not requeued: the restart record: {}", e.what());
    }
  } else {
    detail = "not requeued: without --log-dir there is no restart record to guard against requeueing forever";
  }
  if (detail.empty()) {
    target = requeue_target_of_this_job(env_);
    if (target.requeued)
      code = kExitRequeued;
    else
      detail = fmt::format("not requeued: {}", target.detail);
  }
  // The others learn the code first: once requeued, Slurm ends the step's tasks.
  watchdog_->finish(code);
  if (code == kExitRequeued) {
    const RequeueResult requeued = requeue_job(target.detail);
    if (requeued.requeued) {
      detail = fmt::format("requeued job {}", target.detail);
    } else {
      code = kExitPreempted;
      detail = fmt::format("not requeued: {}", requeued.detail);
    }
  }
  say(fmt::format("preempted ({}): {}; {} (exit {})", signal, reached, detail, code));
  StepOutcome verdict = step_verdict(code, detail, step.value_or(0));
  verdict.stragglers = watchdog_->straggler_hosts();
  report_->ended(verdict);
  return code;
}

int Supervisor::failed(int status) {
  std::string how = describe_wait_status(status);
  // For the in-job supervisor: a program killed without a word (SIGKILL) is lost with its node's
  // suspicion, one the out-of-memory killer ended is an out-of-memory kill, the rest its own error.
  StepCause kind = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? StepCause::kRankLost : StepCause::kRankFailed;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && oom_kills_at_start_) {
    const auto now = oom_kills();
    if (now && *now > *oom_kills_at_start_) kind = StepCause::kOutOfMemory;
    if (now && *now > *oom_kills_at_start_)
      how = fmt::format(
          "was killed by the out-of-memory killer (SIGKILL; its memory cgroup's oom_kill count went from "
          "{} to {})",
          *oom_kills_at_start_, *now);
  }
  // An Xid or ECC error on the task's GPU is most often why its program died: named with it.
  const std::string fault = gpus_ ? gpu_fault_summary(gpus_->sample_now()) : "";
  const std::string cause = fmt::format("its program {} (pid {}) {}{}", base_name(o_.command[0]), child_->pid(), how,
                                        fault.empty() ? "" : " after " + fault);
  const std::string tail = relay_->tail();
  const std::string detail = tail.empty() ? "" : "last lines of its output:\n" + tail;
  log_.line("error: " + cause);
  // Rank 0 judges it with the others' failures and ends the job naming the first.
  if (rank_ == 0) watchdog_->fail_job(exit_code_of(status), cause, detail, exited_at_ms_, kind);
  watchdog_->report_failure(kExitFailed, cause, detail, exited_at_ms_, kind);
  return exit_code_of(status);
}

}  // namespace

int supervise_exec(const ExecOptions& options, const Environment& env) {
  ExecTask task;
  try {
    task = this_task(env);
  } catch (const InputError& e) {
    std::cerr << "slurm-train: error: exec: " << e.what() << "\n";
    return kExitUsage;
  }
  Supervisor supervisor(options, env, task);
  return supervisor.run();
}

}  // namespace slurm_train
