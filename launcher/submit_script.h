// The sbatch script `slurm-train submit` writes for a training: pure text from the options, so
// that it can be checked without Slurm.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace slurm_train {

struct SubmitOptions {
  std::string program;  // absolute path of the slurm-train to run (the one submitting)
  std::string config;   // absolute path of the TOML configuration
  std::string workdir;  // absolute: the job runs here (relative paths in the config resolve here)
  std::string job_name = "slurm-train";
  int nodes = 1;
  int tasks_per_node = 0;  // 0: one per GPU with GPUs, else 1
  int gpus_per_node = 0;
  std::string time = "01:00:00";
  std::string partition, account, qos;
  std::string log_dir = "logs";  // relative to workdir, or absolute
  int signal_seconds = 120;      // USR2 this long before the time limit (checkpoint, requeue)
  bool requeue = true;
  // Restarts inside the job (`slurm-train srun`): `nodes` train and `spare_nodes` more are
  // allocated to take a failed node's place; with either above 0 the job is --no-kill.
  int spare_nodes = 0;
  int restarts = 0;
  std::string train_bind, train_nccl;  // the plugin's options, when given
  bool config_has_ckpt_dir = false;    // the configuration (file, environment or keys) names ckpt.dir
  std::vector<std::pair<std::string, std::string>> overrides;  // --section.key=value for run
};

// Problems with the options (empty when all is well); each names the option and what is expected.
std::vector<std::string> validate_submit_options(const SubmitOptions& o);

int effective_tasks_per_node(const SubmitOptions& o);

// A job restarted inside its allocation (spare_nodes or restarts above 0).
bool restarts_in_job(const SubmitOptions& o);

// A job that Slurm may requeue (or restart inside its allocation) needs a checkpoint folder: the --signal warning, a
// preemption or a node failure otherwise ends the training with nothing saved, and the requeued job starts over. When
// the configuration names none, submit gives the job <workdir>/checkpoints/<job name>-<job id>: on the file system the
// job runs from, one folder per job (a requeued job keeps its id and resumes; a new submission starts fresh rather than
// resuming an older run of the same name). Returns that folder without the id (the script appends ${SLURM_JOB_ID}), or
// "" when submit adds no folder (the configuration names one, or the job is not requeued).
std::string added_checkpoint_dir_prefix(const SubmitOptions& o);

// The script; every value that reaches the shell is quoted.
std::string sbatch_script(const SubmitOptions& o, const std::string& version);

// A value in single quotes for bash.
std::string shell_quote(const std::string& s);

}  // namespace slurm_train
