#include "launcher/submit_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "launcher/config_checks.h"
#include "launcher/config_options.h"
#include "launcher/doctor_checks.h"
#include "launcher/submit_script.h"
#include "launcher/subprocess.h"
#include "train/io/trusted_folder.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

std::string this_program() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("slurm-train") : self.string();
}

// The checkpoint folder submit adds is created by the run; until then the nearest existing
// folder above it must take it.
Check check_added_checkpoint_folder(const fs::path& dir, const Environment& env) {
  std::error_code ec;
  fs::path existing = dir;
  while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  return check_folder("checkpoints", existing.string(), env);
}

// Everything that would make the job fail on the node, found here on the login node: the
// options, the configuration's keys and values, and (as run --dry-run checks them) the files it
// names. Fills in what the script needs from the configuration. Throws a ValidationError (exit 2)
// listing every problem; prints the warnings to stderr.
void check_before_submitting(SubmitOptions& o, const ConfigOptions& config_options) {
  std::vector<std::string> problems = validate_submit_options(o);
  try {
    const Environment env = current_environment();
    const RunConfig config = load_run_config(config_options, env);
    o.config_has_ckpt_dir = !config.ckpt.dir.empty();
    std::vector<Check> checks = check_configuration(config, env);
    const std::string ckpt_prefix = added_checkpoint_dir_prefix(o);
    if (!ckpt_prefix.empty()) checks.push_back(check_added_checkpoint_folder(ckpt_prefix, env));
    for (const Check& c : checks) {
      if (c.verdict == Verdict::kFail) problems.push_back(c.what + ": " + c.detail);
      if (c.verdict == Verdict::kWarn) std::cerr << "slurm-train: warning: " << c.what << ": " << c.detail << "\n";
    }
  } catch (const ConfigError& e) {
    problems.push_back(e.what());
  }
  if (problems.empty()) return;
  std::string message = "nothing was submitted:";
  for (const auto& p : problems) message += "\n  " + p;
  throw CLI::ValidationError(message);
}

void submit(SubmitOptions o, const ConfigOptions& config_options, bool dry_run) {
  o.program = this_program();
  o.workdir = fs::current_path().string();
  o.config = fs::absolute(config_options.file).lexically_normal().string();
  o.overrides = config_options.overrides;
  // Fail here, on the login node, rather than after the job waited in the queue.
  check_before_submitting(o, config_options);
  const std::string script = sbatch_script(o, SLURM_TRAIN_VERSION);
  if (dry_run) {
    std::cout << script;
    return;
  }
  // Slurm does not create the output folder: a job whose log folder is missing fails silently.
  // The folder holds the script sbatch reads and the job's logs: one that another user could
  // change is refused here, before the job waits in the queue (train/io/trusted_folder.h).
  const fs::path log_dir = fs::absolute(o.log_dir);
  std::optional<TrustedFolder> folder;
  try {
    folder.emplace("the log folder", log_dir.string(), true);
  } catch (const UntrustedFolder& e) {
    throw CLI::ValidationError(std::string("nothing was submitted: ") + e.what());
  }
  const fs::path script_path = log_dir / (o.job_name + ".sbatch");
  folder->replace(o.job_name + ".sbatch", script);  // a resubmission replaces it whole, or not at all
  const ProcessResult r = run_process({"sbatch", "--parsable", script_path.string()}, "slurm-client");
  if (r.exit_code != 0)
    throw std::runtime_error(fmt::format("sbatch failed (exit {}) for {}", r.exit_code, script_path.string()));
  const std::string job = r.out.substr(0, r.out.find_first_of(";\n"));
  std::cout << fmt::format("submitted job {}\n  script: {}\n  log:    {}\n", job, script_path.string(),
                           (log_dir / fmt::format("{}-{}.out", o.job_name, job)).string());
  const std::string ckpt_prefix = added_checkpoint_dir_prefix(o);
  if (!ckpt_prefix.empty())
    std::cout << fmt::format(
        "  checkpoints: {}{} (added: the configuration names no ckpt.dir and the job may be "
        "requeued; --no-requeue or ckpt.dir to choose otherwise)\n",
        ckpt_prefix, job);
}

}  // namespace

void add_submit_command(CLI::App& app) {
  auto o = std::make_shared<SubmitOptions>();
  auto config = std::make_shared<ConfigOptions>();
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("submit", "write the sbatch script for a training and submit it");
  cmd->add_option("CONFIG", config->file, "TOML configuration of the training")->required()->check(CLI::ExistingFile);
  cmd->add_option("--nodes,-N", o->nodes, "nodes that train")->capture_default_str();
  cmd->add_option("--spare-nodes", o->spare_nodes,
                  "more nodes to allocate as spares: a failed node is left out and the training restarts inside the "
                  "job on a spare, from its newest checkpoint (slurm-train srun; the job is --no-kill)")
      ->capture_default_str();
  cmd->add_option("--restarts", o->restarts,
                  "restarts inside the job at most (default 3 with --spare-nodes, else 0: a failure ends the job)");
  cmd->add_option("--tasks-per-node", o->tasks_per_node, "ranks per node (default: one per GPU, else 1)");
  cmd->add_option("--gpus-per-node,-G", o->gpus_per_node, "GPUs per node")->capture_default_str();
  cmd->add_option("--time,-t", o->time, "time limit")->capture_default_str();
  cmd->add_option("--partition,-p", o->partition, "partition");
  cmd->add_option("--account,-A", o->account, "account");
  cmd->add_option("--qos", o->qos, "quality of service");
  cmd->add_option("--job-name,-J", o->job_name, "job name")->capture_default_str();
  cmd->add_option("--log-dir", o->log_dir, "folder of the job's log (created)")->capture_default_str();
  cmd->add_option("--signal-seconds", o->signal_seconds, "send USR2 this long before the time limit (0: none)")
      ->capture_default_str();
  cmd->add_flag("!--no-requeue", o->requeue,
                "do not requeue the job on preemption or node failure (a requeued job whose configuration names "
                "no ckpt.dir checkpoints to <submit folder>/checkpoints/<job name>-<job id>)");
  cmd->add_option("--train-bind", o->train_bind, "spank_train's --train-bind (soft, strict, none)");
  cmd->add_option("--train-nccl", o->train_nccl, "spank_train's --train-nccl (a profile, or off)");
  cmd->add_flag("--dry-run", *dry_run, "print the script instead of submitting it");
  add_config_key_options(cmd, config);  // passed on to run
  cmd->footer(
      "Before writing anything, submit checks the options (the plugin's with the plugin's own parser), the "
      "configuration and the files it names, as run --dry-run does; a problem exits 2 and nothing is queued.\n"
      "The job is requeued on preemption or node failure unless --no-requeue; when the configuration names no "
      "ckpt.dir, the script adds --ckpt.dir=<submit folder>/checkpoints/<job name>-<job id>, so that the "
      "signalled run saves there and the requeued one resumes; submit prints the folder.");
  cmd->callback([o, config, dry_run, cmd] {
    reject_unknown_options(cmd);
    if (o->spare_nodes > 0 && cmd->count("--restarts") == 0) o->restarts = 3;
    submit(*o, *config, *dry_run);
  });
}

}  // namespace slurm_train
