// Requeue: the facts from scontrol, the array task to requeue, and when not to.
#include <doctest/doctest.h>

#include <string>

#include "launcher/requeue.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("requeue: facts from scontrol, the array task's target, and when not to") {
  const JobFacts plain = parse_scontrol_show_job(
      "JobId=42 JobName=train UserId=root(0) Priority=1 Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0");
  CHECK(plain.job_id == "42");
  CHECK(plain.batch);
  CHECK(plain.requeue);
  CHECK(requeue_target(plain) == "42");
  CHECK_FALSE(why_not_requeueable(plain));

  const JobFacts array =
      parse_scontrol_show_job("JobId=57 ArrayJobId=55 ArrayTaskId=2 JobName=sweep Requeue=1 BatchFlag=1");
  CHECK(requeue_target(array) == "55_2");

  const JobFacts interactive = parse_scontrol_show_job("JobId=60 JobName=bash Requeue=1 BatchFlag=0");
  REQUIRE(why_not_requeueable(interactive));
  CHECK(why_not_requeueable(interactive)->find("not a batch job") != std::string::npos);
  const JobFacts no_requeue = parse_scontrol_show_job("JobId=61 Requeue=0 BatchFlag=1");
  REQUIRE(why_not_requeueable(no_requeue));
  CHECK(why_not_requeueable(no_requeue)->find("sbatch --requeue") != std::string::npos);
  check_refused<std::invalid_argument>([] { parse_scontrol_show_job("slurm_load_jobs error: Invalid job id"); },
                                       "no JobId=");
}
