#!/usr/bin/env bats
# scripts/cluster.sh --nodes 2: each slurmd in its own network namespace with its own hostname,
# so that steps, batch jobs and MPI really cross "hosts".

load helpers

setup_file() {
  start_test_cluster --nodes 2 --gpus 2
}

teardown_file() {
  stop_test_cluster
}

@test "two nodes come up idle, each with two GPUs" {
  run sinfo -h -N -o '%N %T %G'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'node1 idle gpu:2\nnode2 idle gpu:2')" ]
}

@test "each node is its own host on the cluster's bridge" {
  run srun -N2 --ntasks-per-node=1 bash -c 'echo "$(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}")"'
  [ "$status" -eq 0 ]
  sorted=$(sort <<<"$output")
  [[ $sorted =~ ^node1\ 10\.231\.[0-9]+\.11/24$'\n'node2\ 10\.231\.[0-9]+\.12/24$ ]]
}

@test "srun -N2 -n4 hostname prints two different hostnames" {
  run srun -N2 -n4 hostname
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 4 ]
  [ "$(printf '%s\n' "${lines[@]}" | sort -u)" = "$(printf 'node1\nnode2')" ]
}

@test "an MPI program under srun --mpi=pmix -N2 -n4 all-reduces the right sum across hosts" {
  run srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 "$BUILD/test/mpi_layout"
  [ "$status" -eq 0 ]
  [[ $output == *"allreduce sum 10 expected 10: ok"* ]]
  [ "$(grep -c ' host node1 ' <<<"$output")" -eq 2 ]
  [ "$(grep -c ' host node2 ' <<<"$output")" -eq 2 ]
}

@test "an sbatch -N2 job runs its srun step on both nodes" {
  out=$BATS_FILE_TMPDIR/job2.out
  run sbatch --parsable -N2 --ntasks-per-node=2 -o "$out" \
    --wrap "echo batch-on-\$(hostname); srun --mpi=pmix $BUILD/test/mpi_layout"
  [ "$status" -eq 0 ]
  job=$output
  run wait_job "$job" 60
  [ "$output" = COMPLETED ]
  grep -qx batch-on-node1 "$out"
  grep -q "allreduce sum 10 expected 10: ok" "$out"
  grep -q ' host node2 ' "$out"
}

@test "srun -N2 --gres=gpu:2 gives every node's task two devices" {
  run srun -N2 --ntasks-per-node=1 --gres=gpu:2 bash -c 'echo "$(hostname) $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(sort <<<"$output")" = "$(printf 'node1 0,1\nnode2 0,1')" ]
}

@test "stop leaves no process, namespace, bridge or veth behind" {
  port=$TEST_CLUSTER_PORT
  ip netns list | grep -q "^sltr$port-node1"
  ip link show "sltr$port" >/dev/null
  srun -N2 -n2 sleep 300 3>&- &
  srun_pid=$!
  wait_for_running_step
  "$CLUSTER_SH" stop --dir "$TEST_CLUSTER_DIR"
  run cluster_processes "$TEST_CLUSTER_DIR"
  [ -z "$output" ]
  run bash -c "ip netns list | grep '^sltr$port-'"
  [ -z "$output" ]
  ! ip link show "sltr$port" 2>/dev/null
  run bash -c "ip -o link show | grep 'sltr${port}v'"
  [ -z "$output" ]
  # In this shell, srun's parent (run's subshell is not): its own exit status, non-zero.
  srun_status=0
  wait "$srun_pid" || srun_status=$?
  [ "$srun_status" -ne 0 ]
}
