// Requeueing a preempted job: after the checkpoint is written, rank 0 asks Slurm to put the job
// back in the queue (`scontrol requeue`), when the job is a batch job that allows it
// (sbatch --requeue, or JobRequeue=1 in slurm.conf). The job then starts again from the top of
// its script and resumes from the checkpoint.
#pragma once

#include <optional>
#include <string>

#include "spank/jobenv/environment.h"

namespace slurm_train {

struct JobFacts {
  std::string job_id;         // JobId=
  std::string array_job_id;   // ArrayJobId=, empty outside arrays
  std::string array_task_id;  // ArrayTaskId=
  bool batch = false;         // BatchFlag=1
  bool requeue = false;       // Requeue=1
};

// Parses `scontrol show job --oneliner JOBID` output. Throws std::invalid_argument when JobId is
// missing.
JobFacts parse_scontrol_show_job(const std::string& text);

// What `scontrol requeue` takes: "<array job>_<task>" for an array task, else the job id.
std::string requeue_target(const JobFacts& job);

// Why the job cannot be requeued, or nullopt when it can.
std::optional<std::string> why_not_requeueable(const JobFacts& job);

struct RequeueResult {
  bool requeued = false;  // requeue_target_of_this_job: it may be requeued
  std::string detail;     // the target, or why not
};

// Inside a Slurm job (SLURM_JOB_ID set): looks the job up; requeued = true with the target when
// it may be requeued.
RequeueResult requeue_target_of_this_job(const Environment& env);

// scontrol requeue TARGET; the result says whether it worked, and why not.
RequeueResult requeue_job(const std::string& target);

}  // namespace slurm_train
