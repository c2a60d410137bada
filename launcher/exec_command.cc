#include "launcher/exec_command.h"

#include <charconv>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>

#include "launcher/cli_validators.h"
#include "launcher/exec_supervisor.h"
#include "launcher/exit_codes.h"
#include "spank/jobenv/environment.h"

namespace slurm_train {

ExecCommandLine split_exec_command_line(int& argc, char** argv, const char* command) {
  ExecCommandLine line;
  if (argc < 2 || std::strcmp(argv[1], command) != 0) return line;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") != 0) continue;
    line.separator = true;
    line.program.assign(argv + i + 1, argv + argc);
    argc = i;
    break;
  }
  return line;
}

void add_exec_command(CLI::App& app, int& exit_code, const ExecCommandLine& line) {
  auto options = std::make_shared<ExecOptions>();
  const CLI::Validator seconds = non_negative_number("seconds, a number >= 0", "SECONDS");
  const CLI::Validator count = whole_number(std::numeric_limits<int>::max());
  CLI::App* cmd = app.add_subcommand(
      "exec",
      "supervise any program on every task of a job step: srun slurm-train exec [OPTIONS] -- PROGRAM [ARGS...]");
  cmd->add_option_function<std::string>(
         "--log-dir",
         [options](const std::string& dir) {
           options->log_dir = dir;
           options->log_dir_given = true;
         },
         "every rank's program output, line by line with the UTC time and the rank, is appended to "
         "<log-dir>/<job id>/rank-<N>.log (default $SLURM_TRAIN_LOG_DIR, else slurm-train-logs); empty: no logs")
      ->expected(0, 1);
  cmd->add_option("--hang-timeout", options->hang_timeout,
                  "seconds a rank's program may go without writing output or touching $SLURM_TRAIN_HEARTBEAT "
                  "before the job ends (exit 4); 0: off (the default)")
      ->check(seconds);
  cmd->add_option("--kill-grace", options->kill_grace,
                  "when the job ends early (a rank died, a hang), seconds between SIGTERM and SIGKILL to every "
                  "rank's program (default 5)")
      ->check(seconds);
  cmd->add_option("--preempt-signal", options->preempt_signal,
                  "the signal the program gets when Slurm signals preemption (SIGUSR1, SIGUSR2 or SIGTERM reach "
                  "the supervisor); default: the one Slurm sent");
  cmd->add_option("--preempt-grace", options->preempt_grace,
                  "seconds the program has to checkpoint and exit after the preemption signal before it is ended "
                  "(default 120; Slurm's KillWait after SIGTERM is shorter)")
      ->check(seconds);
  cmd->add_option("--max-restarts-without-progress", options->max_restarts_without_progress,
                  "do not requeue (exit 7) after this many preempted runs in a row without progress: the step in "
                  "the heartbeat file did not grow or, without one, the run lasted under a minute; 0: never "
                  "(default 3)")
      ->check(count);
  cmd->add_option("--straggler-threshold", options->straggler_threshold,
                  "name a rank whose compute time per step (the seconds its program writes after the step in "
                  "$SLURM_TRAIN_HEARTBEAT, else its pace) stays above this many times the ranks' median (default "
                  "1.2; 0: off)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            double t = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), t);
            if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
                !(t == 0 || (t > 1 && t <= 100)))
              return value +
                     ": expected a factor above 1 (1.2: 20% slower than the median) up to 100, or 0 to "
                     "turn straggler detection off";
            return "";
          },
          "FACTOR"));
  cmd->add_option("--prometheus", options->prometheus,
                  "each rank samples its GPUs (NVML) every 5 s into FILE's rank file, FILE.rank<N>.prom (for "
                  "node_exporter's textfile collector; FILE's own name is left for the program's metrics)");
  cmd->add_option(
      "--metrics", options->metrics,
      "rank 0 appends the figures the program reports (slurm_train.heartbeat(step, name=value, ...)) "
      "to this JSON-lines file, one {\"program\": {\"step\", \"time\", NAME: VALUE...}} a report, and "
      "every rank's GPU utilisation and power ({\"gpu\": ...}) every 5 s and at the end, then the job's GPU "
      "energy ({\"energy\": {\"steps\", \"joules\", \"joules_per_step\", ...}}: every rank's, from its "
      "program's first reported step to its exit); \"{job}\" in it is the job id; its newest figures "
      "also go to --prometheus FILE");
  cmd->add_option(
      "--tensorboard", options->tensorboard,
      "rank 0 writes the figures the program reports as TensorBoard scalars (tag: the figure's name, "
      "step: the reported step) to an event file in this folder; \"{job}\" in it is the job id; in a requeued or "
      "restarted job the program's first step marks the restart (TensorBoard drops the earlier run's "
      "points from there)");
  auto* tokens = cmd->add_option("--tokens-per-step", options->tokens_per_step,
                                 "the tokens one step of the whole job trains on (every rank's batch together): "
                                 "the GPU energy at the end is also given per token")
                     ->check(whole_number(std::numeric_limits<std::uint32_t>::max(), 1));
  cmd->add_option("--samples-per-step", options->samples_per_step,
                  "the same in samples: the GPU energy at the end is also given per sample")
      ->check(whole_number(std::numeric_limits<std::uint32_t>::max(), 1))
      ->excludes(tokens);
  // Only what comes before `--` reaches the parser (split_exec_command_line); a word here is a
  // program given without it.
  auto stray = std::make_shared<std::vector<std::string>>();
  cmd->add_option("program", *stray, "-- PROGRAM [ARGS...]: the program to supervise, and its arguments");
  cmd->footer(std::string(kExecExitCodeTable) +
              "\nThe program gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT\n"
              "(the plugin's, or the same values derived from SLURM_*) and SLURM_TRAIN_HEARTBEAT, a file it may\n"
              "touch or write its step number to, then optionally the seconds the step spent computing (its waits\n"
              "in collectives left out: what names a straggler), in Python:\n"
              "  with open(os.environ[\"SLURM_TRAIN_HEARTBEAT\"], \"w\") as f:\n"
              "      f.write(f\"{step} {compute_seconds}\")\n"
              "and SLURM_TRAIN_PROGRAM_PIPE, where it reports figures and that it is done. The Python module\n"
              "slurm_train (module load slurm-train) does all of it: heartbeat(step, loss=...), stop_requested(),\n"
              "save(), latest(), time_left(), restart_count(), done(); pydoc3 slurm_train.\n");
  cmd->callback([options, stray, line, &exit_code] {
    if (!line.separator || !stray->empty() || line.program.empty()) {
      std::cerr << "slurm-train: error: exec: "
                << (!line.separator || !stray->empty() ? "the program must follow '--'" : "no program after '--'")
                << ": slurm-train exec [OPTIONS] -- PROGRAM [ARGS...]\n";
      exit_code = kExitUsage;
      return;
    }
    options->command = line.program;
    const Environment env = current_environment();
    // As for `run`, SLURM_TRAIN_LOG_DIR sets the default.
    if (!options->log_dir_given && env.count("SLURM_TRAIN_LOG_DIR"))
      options->log_dir = env_value(env, "SLURM_TRAIN_LOG_DIR");
    exit_code = supervise_exec(*options, env);
  });
}

}  // namespace slurm_train
