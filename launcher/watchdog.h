// The watchdog: a thread on every rank, and a control connection (TCP) from every rank to
// rank 0, beside MPI. Through it rank 0 keeps a table of every rank's step and phase, so that:
//   - a rank that dies (SIGKILL, the OOM killer, a lost node) closes its connection and rank 0
//     ends the whole job at once, naming it; if rank 0 dies, every rank sees its connection
//     close and ends itself. Neither mpirun nor srun (without --kill-on-bad-exit) would end a
//     job whose other ranks wait in a collective for a peer that is gone.
//   - a rank that makes no progress for --hang-timeout seconds is named, with the phase it is
//     stuck in and the ranks that wait for it, from a table gathered without the collective
//     that is stuck; then the job ends with kExitHang.
// The watchdog thread never calls MPI (MPI runs funneled through the main thread); it ends the
// job by telling every rank over its connection and calling _exit.
// Two ways to find rank 0: `run` broadcasts its address through MPI; `exec`, which runs no MPI,
// derives it from the job's facts (the step's first node, a port from job and step).
// Only the job's own ranks get in: each proves it (launcher/control_auth.h: `run` with a secret
// broadcast over MPI, `exec` with a munge credential), every later frame is sealed with its
// connection's key and speaks for that connection's rank only, and strangers are closed without
// any effect on the job (launcher/control_admission.h bounds them and logs each kind once).
#pragma once

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "launcher/control_admission.h"
#include "launcher/control_auth.h"
#include "launcher/job_energy.h"
#include "launcher/rank_status.h"
#include "launcher/step_outcome.h"
#include "launcher/straggler_judge.h"
#include "launcher/watchdog_wire.h"
#include "train/comm/comm.h"
#include "train/loop/metrics.h"
#include "train/loop/train_phase.h"

namespace slurm_train {

class RankLog;

// Written by the training loop, read by the watchdog thread.
class TrainProgress {
 public:
  void set(TrainPhase phase, std::uint64_t step) {
    step_.store(step, std::memory_order_relaxed);
    phase_.store(static_cast<std::uint32_t>(phase), std::memory_order_relaxed);
    counter_.fetch_add(1, std::memory_order_release);
  }
  std::uint64_t counter() const { return counter_.load(std::memory_order_acquire); }
  // A step's compute time (the step without its waits in collectives), for the straggler judge;
  // `steps` steps of that time each (`exec` sees several steps at one heartbeat).
  void add_compute(double seconds_per_step, std::uint64_t steps = 1) {
    // Bounded: `exec` passes a program's own figures, and a double too large for the integer is
    // undefined behaviour in the cast.
    const double us = std::min(1e6 * std::max(0.0, seconds_per_step) * static_cast<double>(steps), 1e18);
    compute_us_.fetch_add(static_cast<std::uint64_t>(us), std::memory_order_relaxed);
    compute_steps_.fetch_add(steps, std::memory_order_relaxed);
  }
  // The mean compute time (microseconds) and steps since the last call.
  std::pair<std::uint64_t, std::uint64_t> take_compute() {
    const std::uint64_t steps = compute_steps_.exchange(0, std::memory_order_relaxed);
    const std::uint64_t us = compute_us_.exchange(0, std::memory_order_relaxed);
    return {steps > 0 ? us / steps : 0, steps};
  }
  std::uint64_t step() const { return step_.load(std::memory_order_relaxed); }
  TrainPhase phase() const { return static_cast<TrainPhase>(phase_.load(std::memory_order_relaxed)); }

 private:
  std::atomic<std::uint64_t> counter_{0}, step_{0};
  std::atomic<std::uint32_t> phase_{0};
  std::atomic<std::uint64_t> compute_us_{0}, compute_steps_{0};
};

struct RankIdentity {
  std::string host;
  int pid = 0;
  std::string cpus, device;
};

struct WatchdogOptions {
  double hang_timeout = 600;     // seconds without progress; 0: no hang detection
  double connect_timeout = 120;  // for every rank to reach rank 0
  // Runs on whichever thread ends this process, just before _exit: `exec` ends its program there.
  std::function<void()> before_exit;
  // Rank 0 prints the failures other ranks report, with the last lines they sent (`exec`: the
  // user watches task 0's console, and the failing rank's supervisor is not the program).
  bool print_reported_failures = false;
  // Rank 0 waits this long after the first failure a rank reports for others before it ends the
  // job, and names the one that happened first (`exec`: when one program dies, its peers' fail
  // a moment later, and the first is the cause). 0: the first reported ends the job at once.
  double gather_failures_seconds = 0;
  // Rank 0 names a rank whose compute time per step stays above this many times the ranks'
  // median for `straggler_windows` windows of `straggler_window_seconds` (straggler_judge.h);
  // 0: no straggler detection.
  double straggler_threshold = 0;
  int straggler_windows = 3;
  double straggler_window_seconds = 2;
  // Rank 0: called just before it ends the job, on whichever thread, with the verdict (the in-job
  // supervisor's step outcome). It must not throw.
  std::function<void(const StepOutcome&)> on_verdict;
  // Rank 1: called when it ends the job because rank 0 went silent (a stopped process, its node
  // cut off), with a verdict naming rank 0, which cannot give its own. It must not throw.
  std::function<void(const StepOutcome&)> on_root_verdict;
  // The newest Xid or ECC error on this rank's GPUs ("" while none), sent with its beats so that
  // rank 0 can name it when the rank dies or hangs. Called on the watchdog's thread.
  std::function<std::string()> gpu_fault;
  // This rank's GPUs' newest reading (nullopt: none), sent with its beats so that rank 0 can
  // write every rank's in the metrics file (`exec`; `run` gathers them at its evaluations).
  // Called on the watchdog's thread.
  std::function<std::optional<GpuReading>()> gpu_reading;
};

// Where rank 0 listens when there is no MPI to broadcast it: every task derives the same values
// from the job's facts.
struct WatchdogRendezvous {
  int rank = 0, size = 1;
  std::string root_host;  // the host task 0 runs on (the step's first node)
  int port = 0;           // rank 0 listens on it
};

class Watchdog {
 public:
  // Collective over `comm` (rank 0 broadcasts its address). Throws std::runtime_error when this
  // rank cannot reach rank 0.
  Watchdog(Comm& comm, const RankIdentity& me, const WatchdogOptions& options, RankLog& log);
  // Without MPI: rank 0 listens on rendezvous.port, the others connect to root_host and prove
  // themselves with `auth` (unused in a job of one rank). Throws std::runtime_error when rank 0
  // cannot listen there or this rank cannot reach rank 0.
  Watchdog(const WatchdogRendezvous& rendezvous, std::unique_ptr<ControlAuth> auth, const RankIdentity& me,
           const WatchdogOptions& options, RankLog& log);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  TrainProgress& progress() { return progress_; }

  // Rank 0: waits (at most `timeout_seconds`) until every rank has connected and returns their
  // identities (the others get an empty table).
  std::vector<RankStatus> wait_for_all_ranks(double timeout_seconds = 1e9);
  // Rank 0: whether every rank has reached it (the others: true).
  bool all_connected();

  // A rank about to abort on an error tells rank 0 first, so that rank 0 ends the job naming
  // the failure rather than reporting a lost rank.
  // `detail` (the last lines of a program's output, say) goes to rank 0 with it.
  // `when_ms` (Unix time) is when it happened, to name the first of failures reported together.
  // `kind`: what rank 0's verdict names as the cause (kRunning: the one `exit_code` stands for).
  void report_failure(int exit_code, const std::string& cause, const std::string& detail = {},
                      std::uint64_t when_ms = 0, StepCause kind = StepCause::kRunning) noexcept;

  // Rank 0: its own failure, judged with those the others report (gather_failures_seconds);
  // the watchdog's thread then ends the job, naming the first. Never returns.
  [[noreturn]] void fail_job(int exit_code, const std::string& cause, const std::string& detail, std::uint64_t when_ms,
                             StepCause kind = StepCause::kRunning);

  // The pid the rank table shows for this rank from now on (`exec`: its program's).
  void set_pid(int pid) noexcept;

  // The normal end of this rank (training done or preempted): the peers stop watching it.
  // `code` travels with it (rank 0's tells the others the job's exit code).
  void finish(int code = 0) noexcept;

  // Rank 0: marks itself finished and waits until every rank has finished (a rank that fails or
  // is lost ends the job meanwhile); returns the table, with each rank's code.
  std::vector<RankStatus> wait_for_all_finished();

  // The others: finish(code), then wait for rank 0's own finish and return its code. `energy`
  // (`exec`: this rank's GPU energy over its program's steps) goes to rank 0 with the bye.
  int finish_and_wait_for_rank0(int code, const std::optional<RankEnergy>& energy = std::nullopt);

  // Rank 0: the stragglers named since the last call (the training loop's metrics take them).
  std::vector<RankSlowdown> take_new_stragglers();
  // Rank 0: the hosts of every straggler named so far, in order (the step's outcome).
  std::vector<std::string> straggler_hosts();
  // Rank 0: the newest GPU reading each other rank's beats carried, in rank order (ranks without
  // a GPU, or not heard from yet, are left out; rank 0's own is the caller's).
  std::vector<RankGpuReading> member_gpu_readings();
  // Rank 0: the GPU energy each other rank with a GPU sent with its bye, in rank order (call it
  // after wait_for_all_finished; rank 0's own is the caller's).
  std::vector<RankEnergy> member_energies();

 private:
  struct Conn;
  using TimePoint = std::chrono::steady_clock::time_point;

  void run_root();
  void judge_stragglers(TimePoint now);  // with mutex_ held
  void accept_ranks(TimePoint now);
  void pause_accepting(TimePoint until);
  void read_rank(Conn& c, TimePoint now, std::unique_lock<std::mutex>& lock);
  bool admit_rank(Conn& c, TimePoint now);                            // with mutex_ held: false when refused
  void refuse(Conn& c, ControlRefusal kind, const std::string& why);  // with mutex_ held
  void note_refusal(ControlRefusal kind, const std::string& source, const std::string& why);
  void close_silent(TimePoint now);  // with mutex_ held
  void close_conn(Conn& c);
  void log_refusals();  // rank 0, at its end
  void judge(TimePoint started, TimePoint now, std::unique_lock<std::mutex>& lock);
  void init_table(const RankIdentity& me);
  void connect_to_root(int port, const std::vector<std::string>& addresses);
  bool send_to_root(WatchdogFrame f);  // a member: sealed, under send_mutex_; false when it failed
  void run_member();
  // `verdict`: who and what was at fault, where known (rank 0's on_verdict gets it).
  [[noreturn]] void end_job(int exit_code, const std::string& message, bool print, StepOutcome verdict = {});
  [[noreturn]] void exit_process(int exit_code);
  void send_all(const WatchdogFrame& f);       // rank 0, with mutex_ held: sealed for each
  void send_to_peers(const WatchdogFrame& f);  // rank 0: to all; the others: to rank 0
  void stop_thread();
  void say_bye(int code,
               const std::optional<RankEnergy>& energy = std::nullopt) noexcept;  // once: kBye with `code` to the peers
  struct Failure {
    int rank = 0;
    std::string host, text, tail;
    std::uint64_t when_ms = 0;
    int code = 0;
    StepCause kind = StepCause::kRunning;  // kRunning: the exit code's cause
  };
  void add_failure(Failure f, TimePoint now);  // with mutex_ held

  TrainProgress progress_;
  RankIdentity me_;
  WatchdogOptions options_;
  RankLog& log_;
  int rank_ = 0, size_ = 1;
  int listen_fd_ = -1, root_fd_ = -1, epoll_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::unique_ptr<ControlAuth> auth_;
  // A member's end of its connection: the key, the frame numbers each way, what came unread.
  SessionKey root_key_{};
  std::uint64_t root_seq_out_ = 1, root_seq_in_ = 1;
  std::string root_in_;
  std::string root_address_;
  std::string root_name_;  // rank 0's host
  // Rank 0's thread only (and rank 0's end, with mutex_ held): strangers and the listener.
  ControlAdmission admission_;
  bool accepting_ = true;
  TimePoint accept_paused_until_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<int> pid_{0};
  std::atomic<int> own_exit_code_{0};  // fail_job's: rank 0 exits with it

  std::mutex mutex_;       // guards table_, conns_ (root), connected_ and sends on them
  std::mutex send_mutex_;  // a member's sends to rank 0 (beats from the thread, bye or fail from main)
  std::condition_variable all_connected_;
  std::condition_variable all_finished_;   // rank 0: a rank said bye
  std::condition_variable root_finished_;  // the others: rank 0 said bye
  bool root_said_bye_ = false;
  int root_code_ = 0;
  std::vector<RankStatus> table_;
  std::optional<StragglerJudge> stragglers_;  // rank 0, when straggler_threshold > 0
  TimePoint window_started_{};
  std::vector<RankSlowdown> new_stragglers_;
  std::vector<std::string> straggler_hosts_;
  std::vector<std::optional<RankGpuReading>> gpu_readings_;  // by rank, sized at the first one
  std::vector<std::optional<RankEnergy>> energies_;          // by rank, from their byes, sized at the first one
  std::vector<std::unique_ptr<Conn>> conns_;
  std::unordered_map<int, Conn*> conn_by_fd_;  // rank 0's thread only
  // Rank 0's thread only: each rank's last progress counter and when it last changed.
  std::vector<std::uint64_t> last_counter_;
  std::vector<TimePoint> last_progress_;
  std::vector<TimePoint> last_heard_;  // each rank's last frame: a silent rank's beats stopped
  std::vector<Failure> failures_;      // reported, not yet judged (gather_failures_seconds)
  TimePoint failures_deadline_{};
  int connected_ = 1;
  std::thread thread_;
};

}  // namespace slurm_train
