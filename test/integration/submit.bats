#!/usr/bin/env bats
# slurm-train submit on a one-node local cluster: what it checks before anything is written or
# queued (the plugin's options, the configuration and the files it names), and the checkpoint
# folder it gives a requeueable job whose configuration names none, up to a job that Slurm
# signals, which saves there, requeues itself and resumes.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 1
  # A user's submit folder: the examples, and the data where the reference configuration expects it.
  export WORK=$BATS_FILE_TMPDIR/work
  mkdir -p "$WORK/data"
  ln -s "$ROOT/examples" "$WORK/examples"
  ln -s "$TEST_DATA" "$WORK/data/fashion-mnist"
  export PATH=$BUILD/bin:$PATH
}

teardown_file() {
  stop_test_cluster
}

# nothing_queued: no job in the cluster, and no log folder or script written in $WORK.
nothing_queued() {
  [ -z "$(squeue -h -a 2>/dev/null)" ] || { squeue -a; return 1; }
  [ ! -e "$WORK/logs" ] || { ls -R "$WORK/logs"; return 1; }
}

@test "submit checks the plugin's options with the plugin's own parser, before writing anything" {
  cd "$WORK"
  run slurm-train submit examples/fashion-mnist.toml --train-bind=strcit --dry-run
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"--train-bind='strcit': expected soft, strict or none"* ]]
  [[ $output != *"#!/bin/bash"* ]]
  run slurm-train submit examples/fashion-mnist.toml --train-nccl=IB --train-bind=strict
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"--train-nccl 'IB': expected a profile name"* ]]
  [[ $output != *"--train-bind"* ]]
  nothing_queued
  # The values the plugin takes pass.
  run slurm-train submit examples/fashion-mnist.toml --train-bind=strict --train-nccl=off --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"#SBATCH --train-bind=strict"*"#SBATCH --train-nccl=off"* ]]
}

@test "submit checks the configuration and the files it names, as run --dry-run does; exit 2, nothing queued" {
  cd "$WORK"
  run slurm-train submit examples/fashion-mnist.toml --data.test=data/missing.h5
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"test data: "*"data/missing.h5"* ]]
  nothing_queued
  run slurm-train submit examples/fashion-mnist.toml --train.lr=-1 --dry-run
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"train.lr = -1: expected a number in (0, 10]"* ]]
  [[ $output != *"#!/bin/bash"* ]]
  # Every problem at once: the options' and the configuration's.
  run slurm-train submit examples/fashion-mnist.toml --time soon --data.train=nowhere.h5 --dry-run
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"--time 'soon': expected a Slurm time limit"* ]]
  [[ $output == *"train data: "*"nowhere.h5"* ]]
  nothing_queued
}

@test "submit refuses a log folder that another user could change, before writing or queueing anything (exit 2)" {
  cd "$WORK"
  mkdir -m 0777 shared
  run slurm-train submit examples/fashion-mnist.toml --log-dir shared/logs
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"nothing was submitted: the log folder '$WORK/shared/logs': the folder '$WORK/shared' on its way can be written by every user and is not sticky (mode 0777)"* ]]
  [ -z "$(ls -A shared)" ]
  nothing_queued
  rmdir shared
}

@test "submit --dry-run: a requeued job without ckpt.dir checkpoints to <submit folder>/checkpoints/<job name>-<job id>" {
  cd "$WORK"
  run --separate-stderr slurm-train submit examples/fashion-mnist.toml --job-name fm --dry-run
  [ "$status" -eq 0 ]
  script=$output
  [[ $script == *"checkpoints go to"*"$WORK/checkpoints/fm-<job id>"* ]]
  # (the srun line ends the script; bats drops the last newline)
  [[ $script == *" '--ckpt.dir=$WORK/checkpoints/fm-'\"\${SLURM_JOB_ID}\"" ]]
  bash -n <<<"$script"
  run sbatch --test-only <<<"$script"
  [ "$status" -eq 0 ]
  # The configuration's own folder is kept; without requeue nothing is added.
  run slurm-train submit examples/fashion-mnist.toml --ckpt.dir=mine --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"'--ckpt.dir=mine'" ]]
  [[ $output != *"checkpoints go to"* ]]
  run slurm-train submit examples/fashion-mnist.toml --no-requeue --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"#SBATCH --no-requeue"* ]]
  [[ $output != *"ckpt.dir"* ]]
}

@test "submit with the reference configuration (no ckpt.dir): signalled, the job saves, requeues itself, resumes and completes" {
  cd "$WORK"
  # Slow steps (inherited by the job: sbatch exports the environment) keep the training running
  # until the signal comes.
  run env SLURM_TRAIN_INJECT_FAULT=slow@40 SLURM_TRAIN_PROGRESS=lines slurm-train submit examples/fashion-mnist.toml \
    --tasks-per-node 2 --time 00:10:00 --train.steps=300 --train.log_every=10 --model.hidden="[64,32]" \
    --train.metrics= --train.eval_batch=2000 --train.global_batch=250
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ submitted\ job\ ([0-9]+) ]]
  job=${BASH_REMATCH[1]}
  ckpt=$WORK/checkpoints/slurm-train-$job
  [[ $output == *"checkpoints: $ckpt (added"* ]]
  log=$WORK/logs/slurm-train-$job.out
  # The warning Slurm sends before the time limit (--signal=USR2@120), sent now, mid-training.
  deadline=$((SECONDS + 120))
  until grep -q "step *[1-9][0-9]*/300" "$log" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$log"; false; }
    sleep 0.5
  done
  scancel --signal=USR2 "$job"
  run wait_job "$job" 300
  out=$(cat "$log")
  echo "$out"
  [ "$output" = COMPLETED ]
  [[ $out == *"preempted (SIGUSR2"*"checkpoint $ckpt/step-"*".h5 written"* ]]
  [[ $out == *"requeued job $job: it resumes from step"*"(exit 5)"* ]]
  [[ $out == *"resumed from $ckpt/step-"* ]]
  [[ $out == *"final: test_acc"* ]]
  ls "$ckpt"/step-*.h5
}
