#include "launcher/srun_command.h"

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <regex>
#include <thread>

#include "launcher/child_process.h"
#include "launcher/cli_validators.h"
#include "launcher/exit_codes.h"
#include "launcher/node_health.h"
#include "launcher/restart_env.h"
#include "launcher/restart_policy.h"
#include "launcher/step_outcome.h"
#include "launcher/step_report.h"
#include "spank/jobenv/environment.h"
#include "spank/jobenv/hostlist.h"
#include "train/io/trusted_folder.h"
#include "train/io/write_all.h"

namespace slurm_train {

namespace {

struct SrunOptions {
  int restarts = 3;
  int spare_nodes = 0;
  bool allow_fewer = false;
  int min_nodes = 1;
  std::string log_dir;
  bool log_dir_given = false;
  double probe_timeout = 2;
  bool exclude_stragglers = false;
  double verdict_grace = 2;        // after a failure is known, how long srun may take to end the step
  double start_timeout = 300;      // for every rank to reach rank 0's watchdog; 0: no limit
  double node_check_timeout = 20;  // slurm-train doctor --node before a restart; 0: none
  std::vector<std::string> srun_args;
};

// The last signal the supervisor got (sticky: the job was signalled), and one not yet passed on.
std::atomic<int> g_signal{0}, g_to_forward{0};
extern "C" void note_signal(int sig) {
  g_signal = sig;
  g_to_forward = sig;
}

void say(const std::string& line) {
  const std::string text = "slurm-train srun: " + line + "\n";
  [[maybe_unused]] const auto n = ::write(2, text.data(), text.size());
}

std::string join(const auto& items, const char* sep = ",") { return fmt::format("{}", fmt::join(items, sep)); }

// What the supervisor chooses itself; given to srun, it would contradict the choice.
std::string chosen_by_supervisor(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    for (const char* o : {"-N", "--nodes", "-w", "--nodelist", "-x", "--exclude", "-n", "--ntasks"}) {
      const std::string opt = o;
      if (a == opt || (opt.size() > 2 && a.rfind(opt + "=", 0) == 0) || (opt.size() == 2 && a.rfind(opt, 0) == 0))
        return a;
    }
    if (a.rfind("-", 0) != 0) break;  // the program: its own options are its own
  }
  return "";
}

// srun's own report of a task that failed: "srun: error: node2: task 1: Killed".
struct TaskFailure {
  std::string node, what;
};
std::optional<TaskFailure> parse_srun_task_failure(const std::string& line) {
  static const std::regex pattern(R"(^srun: error: ([^: ]+): tasks? [0-9,\-\[\]]+: (.*)$)");
  std::smatch m;
  if (!std::regex_match(line, m, pattern)) return std::nullopt;
  return TaskFailure{m[1], m[2]};
}

// Copies what the pipe has to `to`; false at its end.
bool relay(int fd, int to, std::string* lines) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  write_all(to, std::string_view(buf, static_cast<std::size_t>(n)));
  if (lines) lines->append(buf, static_cast<std::size_t>(n));
  return true;
}

struct StepRun {
  int exit_code = 0;
  std::optional<StepOutcome> outcome;
  // srun's task failures: the first killed by a signal (a task that exits with a status, usually
  // a peer ended by the failure, counts only when none was).
  std::optional<TaskFailure> first_task_failure;
  bool task_killed = false;
  bool start_timed_out = false;  // ended: its ranks never all reached rank 0
  double started_unix = 0, ended_unix = 0;
};

// One srun: its output relayed, rank 0's outcome file watched; once the outcome has a verdict,
// srun gets verdict_grace seconds to end the step (a lost node's tasks may keep it waiting for
// SlurmdTimeout) before it is killed.
StepRun run_step(const std::vector<std::string>& argv, const Environment& env, const TrustedFolder& dir,
                 const std::string& report, const SrunOptions& o, double failure_unix, int attempt) {
  StepRun r;
  r.started_unix = unix_seconds_now();
  ChildProcess srun(argv, env);
  std::string err_lines;
  bool out_open = true, err_open = true, first_step_said = false;
  std::optional<int> status;
  std::optional<std::chrono::steady_clock::time_point> verdict_at;
  while (!status || out_open || err_open) {
    pollfd fds[3] = {{out_open ? srun.stdout_fd() : -1, POLLIN, 0},
                     {err_open ? srun.stderr_fd() : -1, POLLIN, 0},
                     {status ? -1 : srun.pidfd(), POLLIN, 0}};
    ::poll(fds, 3, 200);
    if (fds[0].revents && !relay(srun.stdout_fd(), 1, nullptr)) out_open = false, srun.close_stdout();
    if (fds[1].revents && !relay(srun.stderr_fd(), 2, &err_lines)) err_open = false, srun.close_stderr();
    for (std::size_t nl; (nl = err_lines.find('\n')) != std::string::npos; err_lines.erase(0, nl + 1))
      if (const auto f = parse_srun_task_failure(err_lines.substr(0, nl)); f && !r.task_killed) {
        const bool killed = f->what.rfind("Exited with exit code", 0) != 0;
        if (killed || !r.first_task_failure) r.first_task_failure = f;
        r.task_killed = killed;
      }
    if (!status) status = srun.try_wait();
    if (status) continue;
    // srun runs in a process group of its own: a Ctrl-C or a scancel that reaches the supervisor
    // is srun's too (twice within a second, srun cancels the step).
    if (const int sig = g_to_forward.exchange(0); sig != 0) srun.signal(sig);
    try {
      r.outcome = read_step_outcome(dir, report);
    } catch (const std::exception&) {
      // Being written: read again at the next wake.
    }
    if (r.outcome && r.outcome->started_unix > 0 && attempt > 0 && !first_step_said && failure_unix > 0) {
      first_step_said = true;
      say(fmt::format("restart {}: the new step's first training step came {:.1f} s after the failure", attempt,
                      r.outcome->started_unix - failure_unix));
    }
    // A failure is known (rank 0's verdict, or srun's word of a failed task when rank 0 is gone):
    // srun waits for every task, and a lost node's for SlurmdTimeout.
    const bool failed = (r.outcome && r.outcome->ended_unix > 0 && r.outcome->cause != StepCause::kDone &&
                         r.outcome->cause != StepCause::kPreempted) ||
                        r.first_task_failure;
    if (failed && !verdict_at) verdict_at = std::chrono::steady_clock::now();
    // A launch or an MPI start-up that never completes has no watchdog to see it.
    if (!failed && !verdict_at && o.start_timeout > 0 && !(r.outcome && r.outcome->connected_unix > 0) &&
        unix_seconds_now() - r.started_unix > o.start_timeout) {
      say(
          fmt::format("the step's ranks have not all reached rank 0 within {:.0f} s of its start (--start-timeout; "
                      "a launch or MPI start-up stuck): ending it",
                      o.start_timeout));
      r.start_timed_out = true;
      srun.end(1.0);
      verdict_at = std::chrono::steady_clock::now() + std::chrono::hours(24);
    }
    if (verdict_at && std::chrono::steady_clock::now() - *verdict_at > std::chrono::duration<double>(o.verdict_grace)) {
      say(fmt::format("the step failed {:.0f} s ago and srun still waits (for a lost node?): ending it",
                      o.verdict_grace));
      srun.end(1.0);
      verdict_at = std::chrono::steady_clock::now() + std::chrono::hours(24);
    }
  }
  r.ended_unix = unix_seconds_now();
  r.exit_code = exit_code_of(*status);
  try {
    r.outcome = read_step_outcome(dir, report);
  } catch (const std::exception& e) {
    say(fmt::format("warning: {}", e.what()));
  }
  return r;
}

// srun would take the allocation's task count and nodes; a step's size is the nodes chosen.
Environment without_allocation_size(Environment env) {
  for (const char* name : {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_NODELIST"}) env.erase(name);
  return env;
}

// `slurm-train doctor --node` on each of `nodes` (a task a node, beside the steps that linger),
// ended after o.node_check_timeout seconds: why each node that failed or did not report is unfit.
std::map<std::string, std::string> check_nodes(const std::vector<std::string>& nodes, Environment env,
                                               const SrunOptions& o) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw std::runtime_error(fmt::format("cannot read /proc/self/exe: {}", ec.message()));
  env = without_allocation_size(std::move(env));
  ChildProcess srun(
      {"srun", fmt::format("--nodes={}", nodes.size()), fmt::format("--nodelist={}", join(nodes)),
       "--ntasks-per-node=1", "--overlap", "--mpi=none", "--kill-on-bad-exit=0", self, "doctor", "--node"},
      env);
  std::string out;
  bool out_open = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.node_check_timeout);
  std::optional<int> status;
  while ((!status || out_open) && std::chrono::steady_clock::now() < deadline) {
    pollfd fds[2] = {{out_open ? srun.stdout_fd() : -1, POLLIN, 0}, {status ? -1 : srun.pidfd(), POLLIN, 0}};
    ::poll(fds, 2, 100);
    if (fds[0].revents) {
      char buf[4096];
      const ssize_t n = ::read(srun.stdout_fd(), buf, sizeof buf);
      if (n > 0)
        out.append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR)
        out_open = false;
    }
    if (!status) status = srun.try_wait();
  }
  if (!status) srun.end(1.0);
  return node_check_failures(out, nodes, o.node_check_timeout);
}

constexpr const char* kRecordName = "restarts.jsonl";

void write_record(const TrustedFolder& dir, const std::vector<Attempt>& attempts) {
  try {
    dir.replace(kRecordName, format_attempts(attempts));
  } catch (const std::exception& e) {
    say(fmt::format("warning: the record of attempts {}: {}", dir.shown(kRecordName), e.what()));
  }
}

// <log-dir>/<job>, made when missing, as a folder of the job's (train/io/trusted_folder.h): the
// record of attempts decides which nodes are left out, and the steps' outcome files which
// restarts follow; another user who could change them would steer the job.
std::optional<TrustedFolder> open_record_folder(const std::string& dir, int& exit_code) {
  try {
    return TrustedFolder("the log folder", dir, true);
  } catch (const UntrustedFolder& e) {
    say(fmt::format("error: {}", e.what()));
    exit_code = kExitUsage;
  } catch (const std::exception& e) {
    say(fmt::format("error: {}", e.what()));
    exit_code = kExitFailed;
  }
  return std::nullopt;
}

int supervise(const SrunOptions& o) {
  const Environment env = current_environment();
  const auto value = [&](const char* name) { return env_value(env, name); };
  const std::string job = value("SLURM_JOB_ID");
  if (job.empty() || value("SLURM_JOB_NODELIST").empty()) {
    say("error: not inside a Slurm allocation (no SLURM_JOB_ID or SLURM_JOB_NODELIST): run it in a batch script "
        "(sbatch --no-kill --nodes N+K) or an salloc");
    return kExitUsage;
  }
  if (!value("SLURM_STEP_ID").empty() && value("SLURM_STEP_ID") != "4294967294" && value("SLURM_STEP_ID") != "batch") {
    say(fmt::format("error: inside job step {}.{}: run it in the batch script, not under srun", job,
                    value("SLURM_STEP_ID")));
    return kExitUsage;
  }
  if (const std::string chosen = chosen_by_supervisor(o.srun_args); !chosen.empty()) {
    say(
        fmt::format("error: srun option '{}': the supervisor chooses the step's nodes and tasks itself (give "
                    "--ntasks-per-node, and the job's size to sbatch)",
                    chosen));
    return kExitUsage;
  }
  std::vector<std::string> allocation;
  try {
    allocation = expand_hostlist(value("SLURM_JOB_NODELIST"));
  } catch (const std::exception& e) {
    say(fmt::format("error: SLURM_JOB_NODELIST: {}", e.what()));
    return kExitUsage;
  }
  const int step_nodes = static_cast<int>(allocation.size()) - o.spare_nodes;
  if (step_nodes < 1) {
    say(fmt::format("error: --spare-nodes={} leaves no node of the job's {} to train on", o.spare_nodes,
                    allocation.size()));
    return kExitUsage;
  }
  int refused = kExitOk;
  const std::optional<TrustedFolder> folder = open_record_folder(fmt::format("{}/{}", o.log_dir, job), refused);
  if (!folder) return refused;
  const TrustedFolder& dir = *folder;
  const std::string record_path = dir.shown(kRecordName);
  std::vector<Attempt> attempts;
  try {
    if (const auto text = dir.read(kRecordName)) attempts = parse_attempts(*text);
  } catch (const std::exception& e) {
    say(fmt::format("error: {}: {} (move it away to start a fresh record)", record_path, e.what()));
    return kExitFailed;
  }
  std::set<std::string> left_out = nodes_left_out(attempts);
  if (!left_out.empty()) say(fmt::format("nodes left out by earlier attempts of job {}: {}", job, join(left_out)));
  // Preemption and scancel signal the steps themselves; the supervisor must outlive its step to
  // see it end, and then not restart it.
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP}) std::signal(sig, note_signal);

  const RestartLimits limits{o.restarts, o.allow_fewer, o.min_nodes};
  NodeChoice first = choose_nodes({}, allocation, left_out, step_nodes, limits);
  if (first.nodes.empty()) {
    say("error: " + first.why);
    return kExitFailed;
  }
  if (!first.why.empty()) say(first.why);
  std::vector<std::string> nodes = std::move(first.nodes);
  const int first_attempt = attempts.empty() ? 0 : attempts.back().number + 1;
  std::string cause_before;
  double failure_unix = 0;
  for (int attempt = first_attempt;; ++attempt) {
    const int restart = attempt - first_attempt;
    // Before a restart, the chosen nodes' own checks; a node that fails is left out, and the
    // nodes chosen again.
    while (restart > 0 && o.node_check_timeout > 0) {
      const auto begun = std::chrono::steady_clock::now();
      std::map<std::string, std::string> unfit;
      try {
        unfit = check_nodes(nodes, env, o);
      } catch (const std::exception& e) {
        say(fmt::format("warning: the nodes' checks did not run: {}", e.what()));
      }
      say(fmt::format("node checks on {}: {} ({:.1f} s)", join(nodes),
                      unfit.empty() ? "ok" : fmt::format("{} unfit", unfit.size()),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count()));
      if (unfit.empty()) break;
      for (const auto& [node, why] : unfit) {
        left_out.insert(node);
        attempts.back().left_out.push_back(node);
        say(fmt::format("leaving {} out of the job: {}", node, why));
      }
      write_record(dir, attempts);
      std::vector<std::string> healthy;
      for (const auto& n : nodes)
        if (!unfit.count(n)) healthy.push_back(n);
      NodeChoice again = choose_nodes(healthy, allocation, left_out, step_nodes, limits);
      if (again.nodes.empty()) {
        say(fmt::format("{}; {} restart(s) inside the job; nodes left out: {} (record: {})", again.why, restart - 1,
                        join(left_out), record_path));
        return kExitFailed;
      }
      if (!again.why.empty()) say(again.why);
      nodes = std::move(again.nodes);
    }
    Environment step_env = without_allocation_size(env);
    const std::string report = fmt::format("step-{}.outcome", attempt);
    try {
      dir.remove(report);  // a file left at this name must not be read as this step's outcome
    } catch (const std::exception& e) {
      say(fmt::format("error: {}", e.what()));
      return kExitFailed;
    }
    step_env[kRestartCountVar] = std::to_string(restart);
    step_env[kStepReportVar] = dir.shown(report);
    if (restart > 0) {
      step_env[kRestartCauseVar] = cause_before;
      step_env[kFailureTimeVar] = fmt::format("{:.6f}", failure_unix);
    }
    std::vector<std::string> argv{"srun", fmt::format("--nodes={}", nodes.size()),
                                  fmt::format("--nodelist={}", join(nodes)), "--kill-on-bad-exit=1"};
    // A step with a task on a lost node lingers until Slurm marks that node DOWN (SlurmdTimeout)
    // and holds its CPUs on the healthy nodes meanwhile: a restart shares them.
    if (restart > 0) argv.push_back("--overlap");
    argv.insert(argv.end(), o.srun_args.begin(), o.srun_args.end());
    say(fmt::format("{} on {}: {}", restart == 0 ? "step" : fmt::format("restart {} of {}", restart, o.restarts),
                    join(nodes), join(argv, " ")));
    StepRun run;
    try {
      run = run_step(argv, step_env, dir, report, o, failure_unix, restart);
    } catch (const std::exception& e) {
      say(fmt::format("error: {}", e.what()));
      return kExitFailed;
    }
    Attempt a;
    a.number = attempt;
    a.nodes = nodes;
    a.started_unix = run.started_unix;
    a.ended_unix = run.ended_unix;
    a.exit_code = run.exit_code;
    if (run.outcome) {
      a.first_step_unix = run.outcome->started_unix;
      a.started_from = run.outcome->started_from;
      a.step_reached = run.outcome->step;
    }
    if (run.outcome && run.outcome->ended_unix > 0) {
      a.cause = run.outcome->cause;
      a.exit_code = run.outcome->exit_code;
      a.rank = run.outcome->rank;
      a.node = run.outcome->host;
      a.message = run.outcome->message;
      a.gpu_fault = run.outcome->gpu_fault;
    } else if (run.exit_code == 0) {
      a.cause = StepCause::kDone;
    } else if (run.start_timed_out) {
      a.cause = StepCause::kNeverConnected;
      a.message =
          fmt::format("the step's ranks did not all reach rank 0 within {:.0f} s (--start-timeout)", o.start_timeout);
    } else {
      // No verdict from rank 0: it is gone, or the step never got that far.
      a.cause = StepCause::kRankLost;
      if (run.first_task_failure) {
        a.node = run.first_task_failure->node;
        a.message = fmt::format("srun: a task on {} failed: {}", a.node, run.first_task_failure->what);
      } else {
        a.message = fmt::format("srun exited {} without a verdict from rank 0", run.exit_code);
      }
    }
    if (a.first_step_unix > 0) {
      // The steps lost are the newest attempt's that trained, from where it got to where this one
      // resumed; the attempts since (a start-up that never connected) trained nothing to lose.
      for (auto before = attempts.rbegin(); before != attempts.rend() && before->steps_lost < 0; ++before) {
        if (before->first_step_unix <= 0) {
          before->steps_lost = 0;
          continue;
        }
        before->steps_lost =
            static_cast<std::int64_t>(before->step_reached) - static_cast<std::int64_t>(a.started_from);
        break;
      }
      if (failure_unix > 0) a.recovery_seconds = a.first_step_unix - failure_unix;
    }
    // A signalled job (Ctrl-C, scancel, preemption) ended its own step: no node is at fault.
    const bool signalled = g_signal != 0 && a.cause != StepCause::kDone;
    // Nodes at fault: the node a node-level cause names, and any node of the step that Slurm
    // rules out or whose slurmd does not answer.
    if (a.cause != StepCause::kDone && !signalled) {
      std::map<std::string, std::string> problems;
      try {
        problems = node_problems(nodes, o.probe_timeout);
      } catch (const std::exception& e) {
        say(fmt::format("warning: the nodes' health is unknown: {}", e.what()));
      }
      // The probe's word over a weak one: without rank 0's verdict, srun's word of a task that
      // exited with a status names a peer the failure ended, not its cause; and a network
      // partition looks the same from both sides (a rank cut off names as silent the peer it no
      // longer hears). When the node named answers and another node of the step does not, that
      // one is at fault.
      const bool verdict = run.outcome && run.outcome->ended_unix > 0;
      const bool weak = (!verdict && run.first_task_failure && !run.task_killed) || a.cause == StepCause::kHang;
      if (weak && problems[a.node].empty())
        for (const auto& [node, why] : problems)
          if (!why.empty() && node != a.node) {
            a.message = fmt::format("{} lost ({}); {}", node, why, a.message);
            a.node = node;
            a.rank = -1;  // the rank the verdict named is not the one at fault
            break;
          }
      if (const std::string why = node_fault(attempts, a); !why.empty() && problems[a.node].empty())
        problems[a.node] = why;
      if (o.exclude_stragglers && run.outcome)
        for (const auto& host : run.outcome->stragglers)
          if (problems[host].empty()) problems[host] = "a rank there was named a straggler (--exclude-stragglers)";
      for (const auto& [node, why] : problems) {
        if (why.empty() || left_out.count(node)) continue;
        a.left_out.push_back(node);
        left_out.insert(node);
        say(fmt::format("leaving {} out of the job: {}", node, why));
      }
    }
    attempts.push_back(a);
    write_record(dir, attempts);
    say(fmt::format("step ended after {:.1f} s: {} (exit {}){}{}", a.ended_unix - a.started_unix, cause_name(a.cause),
                    a.exit_code, a.rank >= 0 ? fmt::format(", rank {}", a.rank) : "",
                    a.node.empty() ? "" : fmt::format(" on {}", a.node)) +
        (a.step_reached > 0 ? fmt::format(" at step {}", a.step_reached) : ""));
    if (signalled) {
      say(fmt::format("the job got signal {} (preemption or scancel): not restarting", g_signal.load()));
      return a.exit_code;
    }
    const NextStep next = next_step(attempts, allocation, left_out, step_nodes, limits);
    if (!next.restart) {
      const std::string lost = left_out.empty() ? "" : fmt::format("; nodes left out: {}", join(left_out));
      say(fmt::format("{}; {} restart(s) inside the job{} (record: {})", next.why, restart, lost, record_path));
      return next.exit_code;
    }
    if (!next.why.empty()) say(next.why);
    nodes = next.nodes;
    cause_before = fmt::format("{}{}{}", cause_name(a.cause), a.rank >= 0 ? fmt::format(" of rank {}", a.rank) : "",
                               a.node.empty() ? "" : fmt::format(" on {}", a.node));
    failure_unix = run.outcome && run.outcome->ended_unix > 0 ? run.outcome->ended_unix : run.ended_unix;
  }
}

}  // namespace

void add_srun_command(CLI::App& app, int& exit_code, const ExecCommandLine& line) {
  auto o = std::make_shared<SrunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "srun",
      "in a batch job, run a step and restart it inside the job when a node fails: slurm-train srun [OPTIONS] -- "
      "SRUN_ARGS...");
  cmd->add_option("--restarts", o->restarts, "restarts inside the job at most (default 3)")->check(whole_number(1000));
  cmd->add_option("--spare-nodes", o->spare_nodes,
                  "nodes of the job kept idle to take a failed node's place (default 0): steps run on the others")
      ->check(whole_number(100000));
  cmd->add_flag("--allow-fewer", o->allow_fewer,
                "without a spare, go on with fewer nodes (the resume onto another world size is exact)");
  cmd->add_option("--min-nodes", o->min_nodes, "with --allow-fewer, at least this many nodes (default 1)")
      ->check(whole_number(100000));
  cmd->add_option_function<std::string>(
         "--log-dir",
         [o](const std::string& dir) {
           o->log_dir = dir;
           o->log_dir_given = true;
         },
         "the record of attempts goes to <log-dir>/<job id>/restarts.jsonl, beside the rank logs (default "
         "$SLURM_TRAIN_LOG_DIR, else slurm-train-logs)")
      ->expected(1);
  cmd->add_flag("--exclude-stragglers", o->exclude_stragglers,
                "at a restart, also leave out the nodes of ranks the step named stragglers");
  cmd->add_option("--start-timeout", o->start_timeout,
                  "seconds a step has for every rank to reach rank 0 (the launch and MPI's start-up) before it "
                  "is ended and restarted (default 300; 0: no limit)")
      ->check(non_negative_number("seconds, a number >= 0", "SECONDS"));
  cmd->add_option("--node-check-timeout", o->node_check_timeout,
                  "before a restart, each chosen node runs slurm-train doctor --node; a node that fails or does "
                  "not report within this many seconds is left out (default 20; 0: no checks)")
      ->check(non_negative_number("seconds, a number >= 0", "SECONDS"));
  cmd->add_option("--probe-timeout", o->probe_timeout,
                  "seconds a node's slurmd has to answer before the node is left out (default 2)")
      ->check(non_negative_number("seconds, a number >= 0", "SECONDS"));
  auto stray = std::make_shared<std::vector<std::string>>();
  cmd->add_option("srun_args", *stray, "-- SRUN_ARGS...: srun's options and the program, as after srun");
  cmd->footer(
      "Example (a batch script of sbatch --no-kill --nodes=3: 2 nodes train, 1 is a spare):\n"
      "  slurm-train srun --spare-nodes 1 --restarts 3 -- --mpi=pmix --ntasks-per-node=1 \\\n"
      "      slurm-train run --config job.toml\n"
      "Each step gets SLURM_TRAIN_RESTART_COUNT (0, 1, ...) and, when restarted, SLURM_TRAIN_RESTART_CAUSE.\n"
      "Exit code: the last step's (0 when training finished).");
  cmd->callback([o, stray, line, &exit_code] {
    if (!line.separator || !stray->empty() || line.program.empty()) {
      std::cerr << "slurm-train: error: srun: "
                << (!line.separator || !stray->empty() ? "srun's arguments must follow '--'"
                                                       : "no srun arguments after '--'")
                << ": slurm-train srun [OPTIONS] -- SRUN_ARGS...\n";
      exit_code = kExitUsage;
      return;
    }
    o->srun_args = line.program;
    const Environment env = current_environment();
    if (!o->log_dir_given) {
      const auto it = env.find("SLURM_TRAIN_LOG_DIR");
      o->log_dir = it != env.end() && !it->second.empty() ? it->second : "slurm-train-logs";
    }
    exit_code = supervise(*o);
  });
}

}  // namespace slurm_train
