#include "launcher/submit_script.h"

#include <fmt/format.h>

#include <regex>

#include "spank/options.h"

namespace slurm_train {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int effective_tasks_per_node(const SubmitOptions& o) {
  if (o.tasks_per_node > 0) return o.tasks_per_node;
  return o.gpus_per_node > 0 ? o.gpus_per_node : 1;
}

bool restarts_in_job(const SubmitOptions& o) { return o.spare_nodes > 0 || o.restarts > 0; }

std::string added_checkpoint_dir_prefix(const SubmitOptions& o) {
  if (!(o.requeue || restarts_in_job(o)) || o.config_has_ckpt_dir) return "";
  return o.workdir + "/checkpoints/" + o.job_name + "-";
}

std::vector<std::string> validate_submit_options(const SubmitOptions& o) {
  std::vector<std::string> problems;
  auto require = [&](bool ok, std::string message) {
    if (!ok) problems.push_back(std::move(message));
  };
  // #SBATCH lines are not shell: a value there cannot be quoted, so it must be plain.
  static const std::regex plain("[A-Za-z0-9_.,:@%+=/-]*");
  static const std::regex time_limit(R"((\d+-)?\d+(:\d{1,2}){0,2}|(\d+-\d+)|UNLIMITED|infinite)");
  require(o.nodes >= 1 && o.nodes <= 100000, fmt::format("--nodes {}: expected a whole number of at least 1", o.nodes));
  require(o.spare_nodes >= 0 && o.spare_nodes <= 100000,
          fmt::format("--spare-nodes {}: expected a whole number of 0 or more", o.spare_nodes));
  require(o.restarts >= 0 && o.restarts <= 1000, fmt::format("--restarts {}: expected 0 to 1000", o.restarts));
  require(o.tasks_per_node >= 0 && o.tasks_per_node <= 1024,
          fmt::format("--tasks-per-node {}: expected 1 to 1024 (0: one per GPU, else 1)", o.tasks_per_node));
  require(o.gpus_per_node >= 0 && o.gpus_per_node <= 64,
          fmt::format("--gpus-per-node {}: expected 0 to 64", o.gpus_per_node));
  require(std::regex_match(o.time, time_limit),
          fmt::format("--time '{}': expected a Slurm time limit such as 30, 02:00:00 or 1-12:00:00", o.time));
  require(o.signal_seconds >= 0 && o.signal_seconds <= 65535,
          fmt::format("--signal-seconds {}: expected 0 to 65535", o.signal_seconds));
  for (const auto& [name, value] : {std::pair{"--partition", o.partition},
                                    {"--account", o.account},
                                    {"--qos", o.qos},
                                    {"--job-name", o.job_name},
                                    {"--log-dir", o.log_dir}}) {
    require(std::regex_match(value, plain) && value.size() <= 200,
            fmt::format("{} '{}': expected letters, digits and _.,:@%+=/- only", name, value));
  }
  // The plugin's own parser (stricter than `plain`), so that submit accepts exactly what
  // spank_train will: a bad value is found here, not when the job starts.
  RecordedOptions recorded;
  for (const auto& [id, value] : {std::pair{OptionId::bind, o.train_bind}, {OptionId::nccl, o.train_nccl}}) {
    if (value.empty()) continue;
    const std::string problem = record_option(recorded, id, value.c_str());
    require(problem.empty(), problem);
  }
  require(!o.job_name.empty(), "--job-name: must not be empty");
  require(!o.log_dir.empty(), "--log-dir: must not be empty");
  return problems;
}

std::string sbatch_script(const SubmitOptions& o, const std::string& version) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# Written by slurm-train submit {} for {}\n", version, o.config);
  s += "# USR2 comes signal-seconds before the time limit; a requeued job appends to its log.\n";
  s += fmt::format("#SBATCH --job-name={}\n", o.job_name);
  const bool in_job = restarts_in_job(o);
  if (in_job)
    s += fmt::format(
        "# {} node(s) train, {} more are spares; a failed node is left out and the step restarts\n"
        "# inside the job (at most {} times): no-kill keeps the job when a node fails.\n",
        o.nodes, o.spare_nodes, o.restarts);
  s += fmt::format("#SBATCH --nodes={}\n", o.nodes + o.spare_nodes);
  if (in_job) s += "#SBATCH --no-kill\n";
  s += fmt::format("#SBATCH --ntasks-per-node={}\n", effective_tasks_per_node(o));
  if (o.gpus_per_node > 0) s += fmt::format("#SBATCH --gpus-per-node={}\n", o.gpus_per_node);
  s += fmt::format("#SBATCH --time={}\n", o.time);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.account.empty()) s += fmt::format("#SBATCH --account={}\n", o.account);
  if (!o.qos.empty()) s += fmt::format("#SBATCH --qos={}\n", o.qos);
  s += fmt::format("#SBATCH --chdir={}\n", o.workdir);
  s += fmt::format("#SBATCH --output={}/%x-%j.out\n", o.log_dir);
  s += "#SBATCH --open-mode=append\n";
  if (o.signal_seconds > 0) s += fmt::format("#SBATCH --signal=USR2@{}\n", o.signal_seconds);
  s += o.requeue ? "#SBATCH --requeue\n" : "#SBATCH --no-requeue\n";
  if (!o.train_bind.empty()) s += fmt::format("#SBATCH --train-bind={}\n", o.train_bind);
  if (!o.train_nccl.empty()) s += fmt::format("#SBATCH --train-nccl={}\n", o.train_nccl);
  s += "set -euo pipefail\n";
  s += "echo \"== $(date -Is) job ${SLURM_JOB_ID} (restart ${SLURM_RESTART_COUNT:-0}) on ${SLURM_JOB_NODELIST}\"\n";
  const std::string ckpt_prefix = added_checkpoint_dir_prefix(o);
  if (!ckpt_prefix.empty())
    s += fmt::format(
        "# The configuration names no ckpt.dir and the job may be requeued: checkpoints go to\n"
        "# {}<job id>, from where a requeued job resumes.\n",
        ckpt_prefix);
  if (in_job)
    s += fmt::format("{} srun --spare-nodes {} --restarts {} -- ", shell_quote(o.program), o.spare_nodes, o.restarts);
  else
    s += "srun ";
  s += fmt::format("--mpi=pmix {} run --config {}", shell_quote(o.program), shell_quote(o.config));
  for (const auto& [key, value] : o.overrides) s += " " + shell_quote("--" + key + "=" + value);
  if (!ckpt_prefix.empty()) s += " " + shell_quote("--ckpt.dir=" + ckpt_prefix) + "\"${SLURM_JOB_ID}\"";
  s += "\n";
  return s;
}

}  // namespace slurm_train
