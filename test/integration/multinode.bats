#!/usr/bin/env bats
# scripts/cluster.sh --nodes 2: each slurmd in its own network namespace with its own hostname,
# so that steps, batch jobs and MPI really cross "hosts".

load helpers

setup_file() {
  start_test_cluster --nodes 2 --gpus 2
}

teardown_file() {
  stop_test_cluster
  local d
  for d in "$BATS_FILE_TMPDIR"/killed "$BATS_FILE_TMPDIR"/after-killed; do
    [ ! -d "$d" ] || "$CLUSTER_SH" stop --dir "$d"
  done
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
  run ip link show "sltr$port"
  [ "$status" -ne 0 ]
  run bash -c "ip -o link show | grep 'sltr${port}v'"
  [ -z "$output" ]
  # In this shell, srun's parent (run's subshell is not): its own exit status, non-zero.
  srun_status=0
  wait "$srun_pid" || srun_status=$?
  [ "$srun_status" -ne 0 ]
}

@test "a cluster killed without stop and its folder deleted: the next start on its port removes its namespaces and bridge; one that runs is never touched" {
  port=$TEST_CLUSTER_PORT killed=$BATS_FILE_TMPDIR/killed after=$BATS_FILE_TMPDIR/after-killed
  "$CLUSTER_SH" start --dir "$killed" --port "$port" --nodes 2
  # As when a test run's machine or job is killed: every process at once, then its build tree.
  kill -KILL $(cluster_processes "$killed" | cut -d' ' -f1)
  for _ in $(seq 50); do [ -z "$(cluster_processes "$killed")" ] && break; sleep 0.1; done
  [ -z "$(cluster_processes "$killed")" ]
  rm -rf "$killed"
  ip link show "sltr$port" >/dev/null
  ip netns list | grep -q "^sltr$port-node2"
  run "$CLUSTER_SH" start --dir "$after" --port "$port" --nodes 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"removing the network of a cluster on port $port that ended without stop: sltr$port sltr$port-node"* ]]
  [ "$(SLURM_CONF=$after/etc/slurm.conf sinfo -h -N -o '%N %T')" = "$(printf 'node1 idle\nnode2 idle')" ]
  # A cluster that runs on the port: a second start from another folder is refused, and the
  # running cluster keeps its network.
  run "$CLUSTER_SH" start --dir "$BATS_FILE_TMPDIR/third" --port "$port" --nodes 2
  [ "$status" -ne 0 ]
  [[ $output == *"bridge sltr$port already exists: another cluster on port $port runs"* ]]
  run env SLURM_CONF="$after/etc/slurm.conf" srun -N2 -n2 hostname
  [ "$status" -eq 0 ]
  "$CLUSTER_SH" stop --dir "$after"
  run ip link show "sltr$port"
  [ "$status" -ne 0 ]
}
