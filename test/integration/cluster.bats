#!/usr/bin/env bats
# scripts/cluster.sh with one node and four fake GPUs: start, status, srun, sbatch, gres, stop.

load helpers

setup_file() {
  start_test_cluster --nodes 1 --gpus 4
}

teardown_file() {
  stop_test_cluster
}

@test "start brings up one idle node with four GPUs" {
  run sinfo -h -N -o '%N %T %G'
  [ "$status" -eq 0 ]
  [ "$output" = "node1 idle gpu:4" ]
}

@test "status shows the daemons up and exits 0" {
  run "$CLUSTER_SH" status --dir "$TEST_CLUSTER_DIR"
  [ "$status" -eq 0 ]
  [[ $output == *"slurmctld"*"up"* ]]
  [[ $output == *"slurmd-node1"*"up"* ]]
  [[ $output != *DOWN* ]]
}

@test "env prints the SLURM_CONF line to eval" {
  run "$CLUSTER_SH" env --dir "$TEST_CLUSTER_DIR"
  [ "$output" = "export SLURM_CONF=$TEST_CLUSTER_DIR/etc/slurm.conf" ]
}

@test "start again with the same shape is a no-op; another shape is refused" {
  pid=$(cat "$TEST_CLUSTER_DIR/run/slurmctld.pid")
  run "$CLUSTER_SH" start --dir "$TEST_CLUSTER_DIR" --port "$TEST_CLUSTER_PORT" --nodes 1 --gpus 4
  [ "$status" -eq 0 ]
  [[ $output == *"already running"* ]]
  [ "$(cat "$TEST_CLUSTER_DIR/run/slurmctld.pid")" = "$pid" ]
  run "$CLUSTER_SH" start --dir "$TEST_CLUSTER_DIR" --port "$TEST_CLUSTER_PORT" --gpus 2
  [ "$status" -ne 0 ]
  [[ $output == *"another shape"* ]]
  kill -0 "$pid"
}

@test "srun -n2 hostname runs two tasks" {
  run srun -n2 hostname
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [ "${lines[0]}" = "$(hostname)" ]
  [ "${lines[1]}" = "$(hostname)" ]
}

@test "an sbatch job completes and its output file holds what it printed" {
  out=$BATS_FILE_TMPDIR/job.out
  run sbatch --parsable -n2 -o "$out" --wrap 'echo "batch says hello from $SLURM_JOB_ID"; srun -n2 echo step-task'
  [ "$status" -eq 0 ]
  job=$output
  [[ $job =~ ^[0-9]+$ ]]
  run wait_job "$job" 60
  [ "$output" = COMPLETED ]
  grep -qx "batch says hello from $job" "$out"
  [ "$(grep -cx step-task "$out")" -eq 2 ]
}

@test "srun --gres=gpu:2 sees two devices" {
  run srun -n1 --gres=gpu:2 bash -c 'echo "$CUDA_VISIBLE_DEVICES|$SLURM_STEP_GPUS"'
  [ "$status" -eq 0 ]
  [ "$output" = "0,1|0,1" ]
}

@test "--gpus-per-task=1 gives each of four tasks its own device" {
  # stdout only: spank_train.so, when loaded, warns on stderr that Slurm bound GPUs per task.
  run --separate-stderr srun -n4 --gpus-per-task=1 bash -c 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(sort <<<"$output")" = "$(printf '0 0\n1 1\n2 2\n3 3')" ]
}

@test "an MPI program under srun --mpi=pmix -n2 all-reduces the right sum" {
  run srun --mpi=pmix -n2 "$BUILD/test/mpi_layout"
  [ "$status" -eq 0 ]
  [[ $output == *"allreduce sum 3 expected 3: ok"* ]]
}

@test "a busy port stops start with a clear error and leaves nothing behind" {
  other=$BATS_FILE_TMPDIR/other-cluster
  run "$CLUSTER_SH" start --dir "$other" --port "$TEST_CLUSTER_PORT"
  [ "$status" -ne 0 ]
  [[ $output == *"port $TEST_CLUSTER_PORT (slurmctld) is already in use"* ]]
  [ -z "$(ls "$other"/run/*.pid 2>/dev/null)" ]
  [ -z "$(cluster_processes "$other")" ]
}

@test "bad options are refused with the value and what was expected" {
  run "$CLUSTER_SH" start --nodes 0
  [ "$status" -ne 0 ]
  [[ $output == *"--nodes '0': expected a whole number from 1 to 16"* ]]
  run "$CLUSTER_SH" start --gpus two
  [[ $output == *"--gpus 'two': expected a whole number"* ]]
  run "$CLUSTER_SH" start --bogus 1
  [ "$status" -ne 0 ]
  [[ $output == *"unknown option '--bogus'"* ]]
  run "$CLUSTER_SH" frobnicate
  [ "$status" -ne 0 ]
  [[ $output == *"unknown command 'frobnicate'"* ]]
}

@test "stop ends every process of the cluster, its running jobs included" {
  # 307 s: no other test's sleep (test files run side by side).
  srun -n2 sleep 307 3>&- &
  srun_pid=$!
  wait_for_running_step
  # slurmctld lists the step before slurmd has started its slurmstepd: on a busy machine, wait.
  for _ in $(seq 50); do cluster_processes "$TEST_CLUSTER_DIR" | grep -qw slurmstepd && break; sleep 0.2; done
  [ -n "$(cluster_processes "$TEST_CLUSTER_DIR" | grep -w slurmstepd)" ]
  "$CLUSTER_SH" stop --dir "$TEST_CLUSTER_DIR"
  run "$CLUSTER_SH" status --dir "$TEST_CLUSTER_DIR"
  [ "$status" -eq 3 ]
  run cluster_processes "$TEST_CLUSTER_DIR"
  [ -z "$output" ]
  run pgrep -x -f 'sleep 307'
  [ "$status" -ne 0 ]
  # The client learns that its step ended and exits non-zero on its own.
  # In this shell, srun's parent (run's subshell is not): its own exit status, non-zero.
  srun_status=0
  wait "$srun_pid" || srun_status=$?
  [ "$srun_status" -ne 0 ]
}
