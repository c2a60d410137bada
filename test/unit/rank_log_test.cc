// The rank logs' folder.
#include <doctest/doctest.h>

#include "launcher/rank_log.h"

using namespace slurm_train;

TEST_CASE("rank logs go under the job id; an array task is <array>_<task>") {
  CHECK(log_job_id({{"SLURM_JOB_ID", "42"}}) == "42");
  CHECK(log_job_id({{"SLURM_JOB_ID", "57"}, {"SLURM_ARRAY_JOB_ID", "55"}, {"SLURM_ARRAY_TASK_ID", "2"}}) == "55_2");
  CHECK(log_job_id({}).empty());
}
