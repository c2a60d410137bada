#include "launcher/run_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "launcher/checkpoint_owner.h"
#include "launcher/config_checks.h"
#include "launcher/config_options.h"
#include "launcher/console.h"
#include "launcher/doctor_checks.h"
#include "launcher/exit_codes.h"
#include "launcher/fault_injection.h"
#include "launcher/gpu_monitor.h"
#include "launcher/launch_position.h"
#include "launcher/login_node.h"
#include "launcher/mpi_plugin_check.h"
#include "launcher/mpi_session.h"
#include "launcher/preempt_signals.h"
#include "launcher/progress_line.h"
#include "launcher/rank_log.h"
#include "launcher/requeue.h"
#include "launcher/restart_env.h"
#include "launcher/restart_record.h"
#include "launcher/run_hooks.h"
#include "launcher/step_report.h"
#include "launcher/watchdog.h"
#include "spank/jobenv/host.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/checkpoint/write_in_flight.h"
#include "train/comm/comm.h"
#include "train/config/config.h"
#include "train/io/durable_file.h"
#include "train/loop/divergence.h"
#include "train/loop/trainer.h"
#include "train/steps/device.h"

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;

// What `run` takes besides the configuration; the launcher's settings are [run] keys in it.
struct RunOptions {
  std::shared_ptr<ConfigOptions> config = std::make_shared<ConfigOptions>();
  bool print_config = false;
  bool dry_run = false;
};

Console::Mode progress_mode(const std::string& progress) {
  if (progress == "live") return Console::Mode::kLive;
  if (progress == "lines") return Console::Mode::kLines;
  return Console::Mode::kAuto;
}

// Every rank gives up together when rank 0 finds too many restarts without progress.
struct GiveUp : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The log folder's job id, the same on every rank: Slurm's, or one rank 0 makes up.
std::string agreed_job_id(Comm& comm, const Environment& env) {
  char id[128] = {};
  if (comm.rank() == 0) {
    std::string text = log_job_id(env);
    if (text.empty()) {
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
      text = fmt::format("local-{}-{}", stamp, ::getpid());
    }
    std::snprintf(id, sizeof id, "%s", text.c_str());
  }
  comm.broadcast(id, sizeof id, 0);
  return id;
}

// The checkpoint folder claimed for this job before anything there is read or written: rank 0
// claims it, and every rank learns the verdict (kExitOk, or the exit code to end with).
struct FolderVerdict {
  int code = kExitOk;
  std::string message;  // rank 0: the refusal, or a note that a stale owner was taken over
};

// Rank 0 opens the folder once and holds it in `hold` when the claim is granted: the owner and
// restart records go through it.
FolderVerdict agreed_folder_claim(const std::string& dir, const CheckpointOwner& me, Comm& comm,
                                  std::optional<CheckpointFolderHold>& hold) {
  FolderVerdict verdict;
  if (comm.rank() == 0) {
    try {
      TrustedFolder folder = open_checkpoint_folder(dir, true);
      const FolderClaim claim = claim_checkpoint_folder(folder, me, slurm_job_active);
      verdict = {claim.granted ? kExitOk : kExitCheckpointDirBusy, claim.message};
      if (claim.granted) hold.emplace(std::move(folder), me);
    } catch (const UntrustedFolder& e) {
      verdict = {kExitUsage, e.what()};
    } catch (const std::runtime_error& e) {
      verdict = {kExitCheckpointWrite, e.what()};
    }
  }
  comm.broadcast(&verdict.code, sizeof verdict.code, 0);
  return verdict;
}

CheckpointOwner this_run(const std::string& job, const Environment& env) {
  return {job, env_value(env, "SLURM_STEP_ID"), host_name(), static_cast<long>(::getpid()),
          static_cast<std::int64_t>(std::time(nullptr))};
}

// After the checkpoint of a preemption: agree on the exit code, stop the watchdog (once the job
// is requeued Slurm kills its steps, which must not read as ranks that died), then requeue.
int finish_preempted(const RunConfig& config, const Environment& env, Comm& comm, Watchdog& watchdog, Console& console,
                     const TrainResult& result) {
  const std::string signal =
      fmt::format("{} on {} of {} rank(s)", signal_name(result.stop_signal), result.stop_signal_ranks, comm.size());
  int code = kExitPreempted;
  RequeueResult target{false, "no checkpoint was written (ckpt.dir is not set), so the job is not requeued"};
  if (comm.rank() == 0 && !config.ckpt.dir.empty()) {
    console.line(fmt::format("preempted ({}): stopped after step {}, checkpoint {}/{} written", signal,
                             result.steps_done, config.ckpt.dir, checkpoint_file_name(result.steps_done)));
    target = requeue_target_of_this_job(env);
    if (target.requeued) code = kExitRequeued;
  }
  // Everyone exits with rank 0's code (srun reports the highest, mpirun the first).
  watchdog.progress().set(TrainPhase::kAgreement, result.steps_done);
  comm.broadcast(&code, sizeof code, 0);
  watchdog.finish();
  if (comm.rank() != 0) {
    console.line(fmt::format("preempted ({}): checkpoint written by rank 0 after step {}; exit {}", signal,
                             result.steps_done, code));
    return code;
  }
  std::string detail;
  if (code == kExitRequeued) {
    const RequeueResult requeued = requeue_job(target.detail);
    if (requeued.requeued) {
      detail =
          fmt::format("requeued job {}: it resumes from step {} when it runs again", target.detail, result.steps_done);
    } else {
      code = kExitPreempted;
      detail = fmt::format("not requeued: {}; requeue it or run the same command again to resume from step {}",
                           requeued.detail, result.steps_done);
    }
  } else if (!config.ckpt.dir.empty()) {
    detail = fmt::format("not requeued: {}; run the same command again to resume from step {}", target.detail,
                         result.steps_done);
  } else {
    detail = target.detail;
  }
  console.line(fmt::format("preempted ({}): {} (exit {})", signal, detail, code));
  return code;
}

// Before MPI starts every rank finds the same configuration errors; rank 0 alone reports them
// (as it alone prints --print-config and --dry-run), and every rank exits 2.
class PreMpiReporter {
 public:
  explicit PreMpiReporter(LaunchPosition launch) : launch_(launch) {}
  bool speaks() const { return launch_.rank == 0; }
  int usage_error(const std::string& message) const {
    if (speaks())
      std::cerr << "slurm-train: error: " << message
                << (launch_.size > 1
                        ? fmt::format("\n(found alike by all {} ranks before MPI started; reported by rank 0)",
                                      launch_.size)
                        : "")
                << "\n"
                << std::flush;
    return exit_with(kExitUsage);
  }
  // A failure's exit code, after rank 0 has had the time to say why (let_rank0_report_first).
  int exit_with(int code) const {
    if (code != kExitOk) let_rank0_report_first(launch_);
    return code;
  }

 private:
  LaunchPosition launch_;
};

// --dry-run: every check, printed by rank 0; exit 2 when the configuration cannot run, 1 when
// the data or a folder fails a deeper check, 0 when ready.
int dry_run(const RunConfig& config, const Environment& env, const std::vector<Check>& before,
            const PreMpiReporter& reporter) {
  const auto checks = check_configuration(config, env);
  if (reporter.speaks()) {
    for (const auto& c : checks) std::cout << format_check(c) << "\n";
    std::cout << (any_failed(checks) ? "dry run: problems found, nothing was trained\n" : "dry run: ready to train\n");
  }
  if (any_failed(before)) return reporter.exit_with(kExitUsage);
  return reporter.exit_with(any_failed(checks) ? kExitFailed : kExitOk);
}

std::string failed_checks(const std::vector<Check>& checks) {
  std::string text = "the configuration cannot run:";
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) text += fmt::format("\n  {}: {}", c.what, c.detail);
  return text;
}

// The device this rank will train on, for its log and the rank table; a device the run cannot
// use is train()'s error to report, with its exit code.
std::string planned_device(const RunConfig& config, const Comm& comm) {
  const TrainConfig& tc = config.train;
  try {
    return plan_device(tc.device, tc.precision, tc.gpu, tc.device == "cpu" ? CudaProbe{} : probe_cuda(),
                       comm.local_rank(), comm.local_size())
        .name;
  } catch (const std::exception&) {
    return "none usable";
  }
}

// Every rank runs this; an error on any rank tears the whole job down so that no rank is left
// waiting in a collective for one that is gone.
int run(const RunOptions& options) {
  const auto started = Clock::now();
  const Environment env = current_environment();
  const LaunchPosition launch = launch_position(env);
  const PreMpiReporter reporter(launch);
  RunConfig config;
  FaultPlan faults;
  std::vector<int> signals;
  RestartEnv restart;
  try {
    restart = restart_env_of(env);
  } catch (const std::exception& e) {
    return reporter.usage_error(e.what());
  }
  // Only rank 0 writes the outcome; a rank of a later position never constructs a verdict.
  StepReport report(launch.rank == 0 ? restart.report_path : std::string());
  const auto usage_error = [&](const std::string& what) {
    report.ended(step_verdict(kExitUsage, what));
    return reporter.usage_error(what);
  };
  try {
    // Configuration errors are found before MPI starts: the same on every rank.
    config = load_run_config(*options.config, env);
    faults = parse_fault_plan(config.run.inject_fault);
    signals = parse_signal_list(config.run.preempt_signal);
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }
  if (options.print_config) {
    if (reporter.speaks()) std::cout << describe_config(config);
    return kExitOk;
  }
  if (const auto refusal = login_node_refusal(config, env, options.config->file,
                                              config.train.device == "cuda" ? probe_cuda().devices : 0)) {
    if (reporter.speaks()) std::cerr << "slurm-train: " << *refusal << "\n";
    return reporter.exit_with(kExitUsage);
  }
  const auto before = check_before_start(config, static_cast<std::uint64_t>(launch.size), current_memory_facts());
  if (options.dry_run) return dry_run(config, env, before, reporter);
  if (any_failed(before)) return usage_error(failed_checks(before));
  // Open MPI busy-polls while a rank waits in a collective; with ranks sharing cores (or a
  // prefetch thread beside them) that takes the CPU from the ranks still computing. Yielding
  // costs a few microseconds a wait and doubled throughput on a loaded node (make bench).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  // Before MPI_Init: Slurm may signal a job the moment it starts (a requeued job near its time
  // limit gets the --signal warning again at once), and the default action would kill the rank.
  install_preemption_handlers(signals);
  if (const auto missing = missing_mpi_plugin(env)) {
    if (reporter.speaks()) std::cerr << "slurm-train: error: " << *missing << "\n";
    return reporter.exit_with(kExitUsage);
  }
  std::optional<MpiSession> mpi;
  if (launch.needs_mpi()) mpi.emplace(nullptr, nullptr);
  std::unique_ptr<Comm> comm = mpi ? make_mpi_comm() : make_single_process_comm();
  const std::string host = host_name();
  // Again after MPI_Init, so that they replace any the MPI library installed.
  install_preemption_handlers(signals);

  RankLog log;
  std::unique_ptr<GpuMonitor> gpus;  // this rank's GPUs, sampled on a thread of their own (outlives the watchdog)
  std::unique_ptr<Watchdog> watchdog;
  std::optional<Console> console;
  auto fail = [&](int code, const std::string& cause) -> int {
    // An Xid or ECC error on the rank's GPU is most often why it failed: its name goes with it.
    const std::string fault = gpus ? gpu_fault_summary(gpus->sample_now()) : "";
    const std::string message = fmt::format("rank {} of {} on {}: {}{}", comm->rank(), comm->size(), host, cause,
                                            fault.empty() ? "" : " (" + fault + ")");
    if (comm->rank() == 0) {
      StepOutcome verdict = step_verdict(code, message, watchdog ? watchdog->progress().step() : 0);
      verdict.rank = 0, verdict.host = host;
      report.ended(verdict);
    }
    if (console) console->end_live();
    std::cerr << "slurm-train: error: " << message << "\n" << std::flush;
    log.line("error: " + cause);
    if (watchdog) watchdog->report_failure(code, message);
    if (comm->size() > 1) comm->abort(code);
    return code;
  };
  // The step's outcome for the in-job supervisor (rank 0 only), at the step this rank reached.
  const auto report_end = [&](int code, const std::string& message) {
    StepOutcome verdict = step_verdict(code, message, watchdog ? watchdog->progress().step() : 0);
    if (watchdog) verdict.stragglers = watchdog->straggler_hosts();
    report.ended(verdict);
  };
  try {
    const double mpi_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    const std::string job = agreed_job_id(*comm, env);
    const std::string& log_dir = config.run.log_dir;
    if (!log_dir.empty()) log.open(fmt::format("{}/{}/rank-{}.log", log_dir, job, comm->rank()), comm->rank());
    console.emplace(comm->rank() == 0, progress_mode(config.run.progress), env.count("OMPI_COMM_WORLD_SIZE") > 0, log);
    config.train.metrics = metrics_path_for_job(config.train.metrics, job);
    config.train.tensorboard = metrics_path_for_job(config.train.tensorboard, job);
    std::optional<CheckpointFolderHold> folder;
    if (!config.ckpt.dir.empty()) {
      const CheckpointOwner me = this_run(job, env);
      const FolderVerdict verdict = agreed_folder_claim(config.ckpt.dir, me, *comm, folder);
      if (verdict.code != kExitOk) {
        if (comm->rank() == 0)
          std::cerr << "slurm-train: error: " << verdict.message << " (exit " << verdict.code << ")\n" << std::flush;
        log.line(fmt::format("error: the checkpoint folder {} was not claimed (exit {}) {}", config.ckpt.dir,
                             verdict.code, verdict.message));
        report_end(verdict.code, verdict.message);
        return verdict.code;
      }
      if (comm->rank() == 0 && !verdict.message.empty()) console->line(verdict.message);
    }
    const RankIdentity me{host, static_cast<int>(::getpid()), allowed_cpus(), planned_device(config, *comm)};
    log.line(fmt::format("slurm-train {} rank {} of {} (local {} of {}) on {}, pid {}, cpus {}, device {}",
                         SLURM_TRAIN_VERSION, comm->rank(), comm->size(), comm->local_rank(), comm->local_size(), host,
                         me.pid, me.cpus, me.device));
    {
      const PrometheusLabels job_labels = prometheus_labels(env);
      gpus = start_gpu_monitor(env, GpuSeriesLabels{job_labels.job_id, job_labels.job_name, comm->rank(), host},
                               rank_prometheus_path(config.train.prometheus, comm->rank()),
                               [&log](const std::string& line) {
                                 std::cerr << "slurm-train: " << line << "\n" << std::flush;
                                 log.line(line);
                               });
    }
    WatchdogOptions watch;
    watch.hang_timeout = config.run.hang_timeout;
    watch.connect_timeout = 120;
    watch.on_verdict = [&report](const StepOutcome& verdict) { report.ended(verdict); };
    watch.on_root_verdict = [path = restart.report_path](const StepOutcome& verdict) {
      StepReport(path).ended(verdict);
    };
    watch.straggler_threshold = config.run.straggler_threshold;
    watch.gpu_fault = [&gpus] { return gpus ? gpu_fault_summary(gpus->latest()) : std::string(); };
    // A failed step ends with _exit at once, but a checkpoint's background write that is about to
    // finish is worth a moment: the restart would otherwise resume from the one before. Shorter
    // than the in-job supervisor's grace (srun_command.cc), which then ends the step.
    watch.before_exit = [&log] {
      const auto begun = Clock::now();
      const bool finished = wait_for_writes_in_flight(std::chrono::milliseconds(1500));
      const double waited = std::chrono::duration<double>(Clock::now() - begun).count();
      if (waited > 0.001 || !finished)
        log.line(finished ? fmt::format("waited {:.2f} s for the checkpoint write in flight, which finished", waited)
                          : "the checkpoint write in flight did not finish within 1.5 s: it is lost with the step");
    };
    watchdog = std::make_unique<Watchdog>(*comm, me, watch, log);
    watchdog->progress().set(TrainPhase::kStartup, 0);
    const auto ranks = watchdog->wait_for_all_ranks();
    report.connected();
    // Faults are injected in a job's first attempt only, so that a test can watch it recover.
    if (restart.count > 0 && !faults.empty()) {
      if (comm->rank() == 0)
        console->line(
            fmt::format("--inject-fault={}: not injected in restart {} of the job (only in its first attempt)",
                        config.run.inject_fault, restart.count));
      faults = FaultPlan{};
    }
    RunHooks hooks(config, *comm, *watchdog, *console, faults, started);
    if (comm->rank() == 0) hooks.report_to(report, restart);
    if (folder) hooks.keep_records_in(folder->folder());
    if (comm->rank() == 0) {
      console->line(fmt::format("job {}: {} rank(s); rank logs in {}/{}/", job, comm->size(),
                                log_dir.empty() ? "(none: --log-dir is empty)" : log_dir, job));
      for (const auto& r : ranks)
        console->line(
            fmt::format("  rank {:>4}  host {}  pid {}  cpus {}  device {}", r.rank, r.host, r.pid, r.cpus, r.device));
      if (!faults.empty())
        console->line(
            fmt::format("--inject-fault={}: faults will be injected (a testing aid)", config.run.inject_fault));
    }
    hooks.mark_startup(fmt::format("{} {:.2f} s, watchdog", mpi ? "MPI" : "one process without MPI", mpi_seconds));
    LineStream out([&](const std::string& line) { console->line(line); });
    TrainHooks train_hooks = hooks.hooks();
    train_hooks.run_id = job;
    train_hooks.prometheus = prometheus_labels(env);
    train_hooks.gpu = [&gpus](bool now) -> std::optional<GpuReading> {
      if (!gpus) return std::nullopt;
      return gpu_reading(now ? gpus->sample_now() : gpus->latest());
    };
    const TrainResult result = train(config, *comm, out, train_hooks);
    console->end_live();
    if (result.refused_start) throw GiveUp(hooks.give_up_message());
    hooks.finish_record(result.steps_done);
    int code = kExitOk;
    if (result.stop_signal != 0) code = finish_preempted(config, env, *comm, *watchdog, *console, result);
    report_end(code, code == kExitOk ? "training finished" : "preempted: checkpoint written");
    watchdog->finish();
    log.line(fmt::format("done (exit {})", code));
    return code;
  } catch (const GiveUp& e) {
    if (console) console->end_live();
    if (comm->rank() == 0)
      std::cerr << "slurm-train: error: " << e.what() << " (exit " << kExitDoNotRequeue << ")\n" << std::flush;
    log.line(e.what());
    report_end(kExitDoNotRequeue, e.what());
    if (watchdog) watchdog->finish();
    return kExitDoNotRequeue;
  } catch (const TrainingDiverged& e) {
    // Every rank found it at the same step (the values are agreed): they stop together.
    if (console) console->end_live();
    if (comm->rank() == 0)
      std::cerr << "slurm-train: error: " << e.what() << " (exit " << kExitDiverged << ")\n" << std::flush;
    log.line(fmt::format("error: {}", e.what()));
    report_end(kExitDiverged, e.what());
    if (watchdog) watchdog->finish();
    return kExitDiverged;
  } catch (const OnEveryRank<CheckpointWriteError>& e) {
    // The ranks write together and agreed on the failure: they end together, without abort, so
    // that none is killed before rank 0 has removed its partial file and released the folder.
    if (console) console->end_live();
    if (comm->rank() == 0)
      std::cerr << "slurm-train: error: " << e.what() << " (exit " << kExitCheckpointWrite << ")\n" << std::flush;
    log.line(fmt::format("error: {}", e.what()));
    report_end(kExitCheckpointWrite, e.what());
    if (watchdog) watchdog->finish(kExitCheckpointWrite);
    try {
      comm->barrier();
    } catch (const std::exception& lost) {
      return fail(kExitCheckpointWrite, fmt::format("{} (then: {})", e.what(), lost.what()));
    }
    return kExitCheckpointWrite;
  } catch (const CheckpointWriteError& e) {
    // Its own exit code: the job's script can tell "the storage failed" from a training error.
    return fail(kExitCheckpointWrite, e.what());
  } catch (const UntrustedFolder& e) {
    // A folder or file another user could change (the logs, the metrics): the user's to fix, as
    // a configuration error is, and no restart would help.
    return fail(kExitUsage, e.what());
  } catch (const std::exception& e) {
    return fail(kExitFailed, e.what());
  }
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "train on every rank of the job (srun --mpi=pmix, mpirun, or alone)");
  cmd->add_flag("--print-config", options->print_config,
                "print every effective value and where it came from, then exit");
  cmd->add_flag(
      "--dry-run", options->dry_run,
      "check the configuration and the files it names (datasets, memory, output folders), then exit: 0 ready, "
      "1 a deeper check failed (the data read), 2 the configuration cannot run");
  cmd->add_option("--config,-c", options->config->file,
                  "TOML file with [data], [model], [train], [ckpt] and [run] sections")
      ->check(CLI::ExistingFile);
  // The launcher's settings are [run] keys (train/config/config.h: file < environment < command line,
  // shown by --print-config); these options are their usual names.
  auto set = [options](const char* key) {
    return [options, key](const std::string& value) { options->config->overrides.emplace_back(key, value); };
  };
  cmd->add_flag_callback(
      "--no-resume", [options] { options->config->overrides.emplace_back("ckpt.resume", "false"); },
      "start fresh even when ckpt.dir holds a checkpoint (same as --ckpt.resume=false)");
  // "--log-dir=" is the empty value (no rank logs), and never takes the next argument as its own.
  cmd->add_option_function<std::string>("--log-dir", set("run.log_dir"),
                                        "every rank appends to <log-dir>/<job id>/rank-<N>.log (default "
                                        "slurm-train-logs); empty: no rank logs [run.log_dir]")
      ->expected(0, 1);
  cmd->add_option_function<std::string>(
      "--hang-timeout",
      [options](const std::string& value) {
        // Said in the option's own words: "nan" would otherwise turn the watchdog off.
        double seconds = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
        if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(seconds) || seconds < 0)
          throw CLI::ValidationError(
              fmt::format("--hang-timeout {}: expected seconds (a finite number), or 0 to turn "
                          "hang detection off",
                          value));
        options->config->overrides.emplace_back("run.hang_timeout", value);
      },
      "seconds a rank may go without progress before the watchdog ends the job (exit 4); 0: off (default 600) "
      "[run.hang_timeout]");
  cmd->add_option_function<std::string>("--straggler-threshold", set("run.straggler_threshold"),
                                        "name a rank whose compute time per step stays above this many times the "
                                        "ranks' median (default 1.2; 0: off) [run.straggler_threshold]");
  cmd->add_option_function<std::string>("--preempt-signal", set("run.preempt_signal"),
                                        "signals that mean 'checkpoint and stop' (comma-separated, default USR2,TERM; "
                                        "Slurm sends SIGTERM before preempting and the one of sbatch --signal before "
                                        "the time limit) [run.preempt_signal]");
  cmd->add_option_function<std::string>("--max-restarts-without-progress", set("run.max_restarts_without_progress"),
                                        "give up (exit 7) after this many starts in a row from the same checkpoint; "
                                        "0: never (default 3) [run.max_restarts_without_progress]");
  cmd->add_option_function<std::string>("--inject-fault", set("run.inject_fault"),
                                        "testing aid: hang@STEP:RANK, crash@STEP:RANK, nan@STEP:RANK, slow@MS, "
                                        "slow-ckpt@MS (comma-separated) [run.inject_fault]");
  cmd->add_option_function<std::string>("--progress", set("run.progress"),
                                        "progress display of rank 0: live (one line rewritten in place), lines (plain "
                                        "lines every train.log_every steps) or auto (live on a terminal; the default) "
                                        "[run.progress]");
  add_config_key_options(cmd, options->config);
  cmd->footer(kExitCodeTable);
  cmd->callback([options, cmd, &exit_code] {
    reject_unknown_options(cmd);
    exit_code = run(*options);
  });
}

}  // namespace slurm_train
