#include "launcher/requeue.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "launcher/subprocess.h"

namespace slurm_train {

JobFacts parse_scontrol_show_job(const std::string& text) {
  JobFacts job;
  std::istringstream words(text);
  std::string word;
  bool have_id = false;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "JobId" && !have_id)
      job.job_id = value, have_id = true;
    else if (key == "ArrayJobId")
      job.array_job_id = value;
    else if (key == "ArrayTaskId")
      job.array_task_id = value;
    else if (key == "BatchFlag")
      job.batch = value == "1";
    else if (key == "Requeue")
      job.requeue = value == "1";
  }
  if (!have_id || job.job_id.empty())
    throw std::invalid_argument(fmt::format("no JobId= in the scontrol output '{}'", text.substr(0, 200)));
  return job;
}

std::string requeue_target(const JobFacts& job) {
  if (!job.array_job_id.empty() && !job.array_task_id.empty()) return job.array_job_id + "_" + job.array_task_id;
  return job.job_id;
}

std::optional<std::string> why_not_requeueable(const JobFacts& job) {
  if (!job.batch) return "it is not a batch job (srun or salloc started it)";
  if (!job.requeue) return "the job does not allow requeueing (submit it with sbatch --requeue)";
  return std::nullopt;
}

RequeueResult requeue_target_of_this_job(const Environment& env) {
  const std::string id = env_value(env, "SLURM_JOB_ID");
  if (id.empty()) return {false, "not inside a Slurm job (SLURM_JOB_ID is not set)"};
  try {
    const ProcessResult shown = run_process({"scontrol", "show", "job", "--oneliner", id}, "slurm-client");
    if (shown.exit_code != 0) return {false, fmt::format("scontrol show job {} failed (exit {})", id, shown.exit_code)};
    const JobFacts job = parse_scontrol_show_job(shown.out);
    if (const auto why = why_not_requeueable(job)) return {false, *why};
    return {true, requeue_target(job)};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

RequeueResult requeue_job(const std::string& target) {
  try {
    const ProcessResult requeued = run_process({"scontrol", "requeue", target}, "slurm-client");
    if (requeued.exit_code != 0)
      return {false, fmt::format("scontrol requeue {} failed (exit {})", target, requeued.exit_code)};
    return {true, target};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

}  // namespace slurm_train
