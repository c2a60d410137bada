#include "launcher/submit_script.h"

#include <doctest/doctest.h>

using namespace slurm_train;

namespace {

SubmitOptions example() {
  SubmitOptions o;
  o.program = "/opt/slurm-train/bin/slurm-train";
  o.config = "/home/ana/runs/fm.toml";
  o.workdir = "/home/ana/runs";
  return o;
}

}  // namespace

TEST_CASE("submit: shell quoting survives every character") {
  CHECK(shell_quote("plain") == "'plain'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("$(reboot) `x` \"y\"") == "'$(reboot) `x` \"y\"'");
}

TEST_CASE("submit: the script asks for what a preemptible, requeueable training needs") {
  SubmitOptions o = example();
  o.nodes = 4;
  o.gpus_per_node = 8;
  o.partition = "gpu";
  o.train_bind = "strict";
  o.overrides = {{"train.lr", "0.01"}, {"data.train", "/data/it's here.h5"}};
  const std::string s = sbatch_script(o, "9.9.9");
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  for (const char* line : {"#SBATCH --nodes=4\n", "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-node=8\n",
                           "#SBATCH --partition=gpu\n", "#SBATCH --chdir=/home/ana/runs\n",
                           "#SBATCH --output=logs/%x-%j.out\n", "#SBATCH --open-mode=append\n",
                           "#SBATCH --signal=USR2@120\n", "#SBATCH --requeue\n", "#SBATCH --train-bind=strict\n"}) {
    CAPTURE(line);
    CHECK(s.find(line) != std::string::npos);
  }
  CHECK(s.find("--train-nccl") == std::string::npos);
  CHECK(s.find("--account") == std::string::npos);
  CHECK(s.find("srun --mpi=pmix '/opt/slurm-train/bin/slurm-train' run --config '/home/ana/runs/fm.toml' "
               "'--train.lr=0.01' '--data.train=/data/it'\\''s here.h5' "
               "'--ckpt.dir=/home/ana/runs/checkpoints/slurm-train-'\"${SLURM_JOB_ID}\"\n") != std::string::npos);
}

TEST_CASE("submit: a requeued job whose configuration names no ckpt.dir gets one folder per job") {
  SubmitOptions o = example();
  o.job_name = "fm";
  CHECK(added_checkpoint_dir_prefix(o) == "/home/ana/runs/checkpoints/fm-");
  const std::string s = sbatch_script(o, "1");
  CHECK(s.find("# The configuration names no ckpt.dir and the job may be requeued: checkpoints go to\n"
               "# /home/ana/runs/checkpoints/fm-<job id>, from where a requeued job resumes.\n") != std::string::npos);
  CHECK(s.find(" '--ckpt.dir=/home/ana/runs/checkpoints/fm-'\"${SLURM_JOB_ID}\"\n") != std::string::npos);

  o.config_has_ckpt_dir = true;  // the user's folder is kept
  CHECK(added_checkpoint_dir_prefix(o).empty());
  CHECK(sbatch_script(o, "1").find("ckpt.dir") == std::string::npos);

  o.config_has_ckpt_dir = false;
  o.requeue = false;  // nothing to resume: the user asked for no requeue
  CHECK(added_checkpoint_dir_prefix(o).empty());
  CHECK(sbatch_script(o, "1").find("ckpt.dir") == std::string::npos);
}

TEST_CASE("submit: the plugin's options are checked by the plugin's own parser") {
  SubmitOptions o = example();
  for (const char* bind : {"soft", "strict", "none"}) {
    o.train_bind = bind;
    for (const char* nccl : {"off", "ib", "cluster-ib"}) {
      o.train_nccl = nccl;
      CAPTURE(bind);
      CAPTURE(nccl);
      CHECK(validate_submit_options(o).empty());
    }
  }
  o.train_bind = "strcit";
  o.train_nccl = "../ib";
  const auto problems = validate_submit_options(o);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "--train-bind='strcit': expected soft, strict or none");
  CHECK(problems[1].find("--train-nccl") == 0);
  CHECK(problems[1].find("'../ib'") != std::string::npos);
}

TEST_CASE("submit: ranks per node default to one per GPU, else one") {
  SubmitOptions o = example();
  CHECK(effective_tasks_per_node(o) == 1);
  o.gpus_per_node = 4;
  CHECK(effective_tasks_per_node(o) == 4);
  o.tasks_per_node = 2;
  CHECK(effective_tasks_per_node(o) == 2);
  o.requeue = false;
  o.signal_seconds = 0;
  const std::string s = sbatch_script(o, "1");
  CHECK(s.find("#SBATCH --no-requeue\n") != std::string::npos);
  CHECK(s.find("--signal") == std::string::npos);
}

TEST_CASE("submit: bad options are named with what is expected") {
  SubmitOptions o = example();
  CHECK(validate_submit_options(o).empty());
  for (const char* t : {"30", "02:00:00", "1-12:00:00", "10:00", "1-12", "UNLIMITED"}) {
    o.time = t;
    CAPTURE(t);
    CHECK(validate_submit_options(o).empty());
  }
  o.time = "tomorrow";
  o.nodes = 0;
  o.partition = "gpu\n#SBATCH --uid=0";
  o.job_name = "";
  const auto problems = validate_submit_options(o);
  REQUIRE(problems.size() == 4);
  CHECK(problems[0] == "--nodes 0: expected a whole number of at least 1");
  CHECK(problems[1].find("--time 'tomorrow': expected a Slurm time limit") == 0);
  CHECK(problems[2].find("--partition 'gpu\n#SBATCH --uid=0': expected letters") == 0);
  CHECK(problems[3] == "--job-name: must not be empty");
}

TEST_CASE(
    "submit: --spare-nodes allocates the spares, keeps the job when a node fails and runs the step under srun's "
    "supervisor") {
  SubmitOptions o = example();
  o.nodes = 4;
  o.spare_nodes = 1;
  o.restarts = 3;
  o.requeue = false;
  const std::string s = sbatch_script(o, "9.9.9");
  CHECK(s.find("#SBATCH --nodes=5\n") != std::string::npos);
  CHECK(s.find("#SBATCH --no-kill\n") != std::string::npos);
  CHECK(s.find("\n'/opt/slurm-train/bin/slurm-train' srun --spare-nodes 1 --restarts 3 -- --mpi=pmix "
               "'/opt/slurm-train/bin/slurm-train' run --config '/home/ana/runs/fm.toml'") != std::string::npos);
  // Restarts resume from a checkpoint: one folder per job even when the job is not requeued.
  CHECK(added_checkpoint_dir_prefix(o) == "/home/ana/runs/checkpoints/slurm-train-");
  o.spare_nodes = 0;
  o.restarts = 0;
  const std::string plain = sbatch_script(o, "9.9.9");
  CHECK(plain.find("#SBATCH --nodes=4\n") != std::string::npos);
  CHECK(plain.find("--no-kill") == std::string::npos);
  CHECK(plain.find("\nsrun --mpi=pmix ") != std::string::npos);
  o.spare_nodes = -1;
  o.restarts = 1001;
  const auto problems = validate_submit_options(o);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "--spare-nodes -1: expected a whole number of 0 or more");
  CHECK(problems[1] == "--restarts 1001: expected 0 to 1000");
}
