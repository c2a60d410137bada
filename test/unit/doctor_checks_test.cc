#include "launcher/doctor_checks.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("doctor: Slurm facts from the environment") {
  CHECK(check_slurm({}).verdict == Verdict::kOk);
  CHECK(check_slurm({{"SLURM_JOB_ID", "7"}}).verdict == Verdict::kWarn);
  const Check c = check_slurm({{"SLURM_JOB_ID", "7"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_PROCID", "3"},
                               {"SLURM_NTASKS", "4"},
                               {"SLURMD_NODENAME", "n2"},
                               {"SLURM_STEP_NODELIST", "n[1-2]"}});
  CHECK(c.verdict == Verdict::kOk);
  CHECK(c.detail == "job 7 step 0: task 3 of 4 on n2 (nodes n[1-2])");
}

TEST_CASE("doctor: the plugin's absence is a warning only inside a step") {
  CHECK(check_plugin({}).verdict == Verdict::kOk);
  CHECK(check_plugin({{"SLURM_STEP_ID", "0"}}).verdict == Verdict::kWarn);
  const Check c = check_plugin({{"SLURM_TRAIN_PLUGIN", "0.1.0"}, {"SLURM_TRAIN_BIND", "soft"}, {"RANK", "1"}});
  CHECK(c.verdict == Verdict::kOk);
  CHECK(c.detail.find("spank_train 0.1.0: bind=soft") == 0);
}

TEST_CASE("doctor: NCCL interfaces are checked against the node's") {
  CHECK(check_nccl({{"NCCL_SOCKET_IFNAME", "eth"}}, "n1", {"lo", "eth0"}).verdict == Verdict::kOk);
  const Check c = check_nccl({{"NCCL_SOCKET_IFNAME", "ib0"}}, "n1", {"lo", "eth0"});
  CHECK(c.verdict == Verdict::kWarn);
  CHECK(c.detail.find("n1") != std::string::npos);
}

TEST_CASE("doctor: shared filesystems get the HDF5 locking warning") {
  CHECK(filesystem_name(0x6969) == "nfs");
  CHECK(filesystem_name(0x0bd00bd0) == "lustre");
  CHECK(filesystem_name(0xef53) == "ext4");
  CHECK(filesystem_name(0x1234) == "unknown");
  CHECK(locking_is_risky("lustre"));
  CHECK_FALSE(locking_is_risky("ext4"));
  CHECK(format_check({Verdict::kFail, "MPI", "x"}) == "FAIL  MPI          x");
  CHECK(any_failed({{Verdict::kOk, "a", ""}, {Verdict::kFail, "b", ""}}));
  CHECK_FALSE(any_failed({{Verdict::kWarn, "a", ""}}));
}

TEST_CASE("doctor: a munged that cannot be reached is a warning naming its socket (run does not need it)") {
  const Check c = check_munge({{"SLURM_TRAIN_MUNGE_SOCKET", "/nonexistent/munge.socket"}});
  CHECK(c.verdict == Verdict::kWarn);
  CHECK(c.what == "munge");
  CHECK(c.detail.find("exec on several tasks cannot start: munge_encode via /nonexistent/munge.socket") == 0);
}
