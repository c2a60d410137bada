#!/usr/bin/env bats
# slurm-train doctor on a login node and inside jobs of two and three nodes with the plugin and fake
# GPUs; doctor --allreduce's bandwidth by size, and a node whose network is throttled (tc) named.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 3 --gpus 2
}

teardown_file() {
  stop_test_cluster
}

@test "doctor on the login node: every check OK, the dataset and folders named" {
  run "$BUILD/bin/slurm-train" doctor --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" \
    --dir "$BATS_TEST_TMPDIR"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"OK    Slurm        not inside a job"* ]]
  [[ $output == *"OK    MPI          1 rank(s)"* ]]
  [[ $output == *"OK    train data   $TEST_DATA/train.h5: 60000 samples of 784 features, 10 classes"* ]]
  [[ $output == *"OK    folder       '$BATS_TEST_TMPDIR' is writable"* ]]
  [[ $output == *"doctor: no FAIL"* ]]
}

@test "doctor under srun -N2 -n4: the job, the plugin's variables, MPI across nodes, one line per rank" {
  run srun --mpi=pmix -N2 --ntasks-per-node=2 --gres=gpu:2 "$BUILD/bin/slurm-train" doctor
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ OK\ \ \ \ Slurm\ +job\ [0-9]+\ step\ 0:\ task\ 0\ of\ 4\ on\ node1 ]]
  [[ $output == *"OK    plugin       spank_train "*"bind=soft"*"RANK=0 LOCAL_RANK=0 MASTER_ADDR=node1:"* ]]
  [[ $output == *"OK    MPI          4 rank(s), 2 on this node; an all-reduce agreed"* ]]
  [[ $output == *"OK    munge        munged at $TEST_CLUSTER_DIR/munge/munge.socket vouches for this user"* ]]
  [ "$(grep -cE '^rank +[0-3]  node[12] ' <<<"$output")" -eq 4 ]
  [[ $output =~ rank\ +1\ +node1\ +local\ +1\ +CPUs\ [0-9,-]+\ +GPUs\ 1,0 ]]
}

@test "doctor fails, naming the problem, for a missing dataset, an unwritable folder or a bad config" {
  run "$BUILD/bin/slurm-train" doctor --data.train /nonexistent.h5 --dir /proc
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL  train data   cannot open HDF5 file '/nonexistent.h5'"* ]]
  [[ $output == *"FAIL  folder       '/proc' is not writable"* ]]
  [[ $output == *"doctor: 1 rank(s) with a FAIL"* ]]
  run "$BUILD/bin/slurm-train" doctor --train.lr=-2
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL  config       the configuration has problems:"*"train.lr = -2"* ]]
}

@test "doctor warns about an NCCL_SOCKET_IFNAME this node does not have" {
  NCCL_SOCKET_IFNAME=bond9 run "$BUILD/bin/slurm-train" doctor
  [ "$status" -eq 0 ]
  [[ $output == *"WARN  NCCL"*"bond9"* ]]
}

@test "doctor --allreduce under srun -N2 -n2: bandwidth by size from 8 B to 64 MiB as nccl-tests prints it, no wrong sum" {
  run srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" doctor --allreduce
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"all-reduce over MPI on CPUs: 2 rank(s) on 2 node(s); float32 sums in place, 8 B to 64 MiB; at most 60 s"* ]]
  [[ $output == *"size(B)"*"count"*"time(us)"*"algbw"*"busbw"*"#wrong"* ]]
  # One row a size, 8 B doubling to 64 MiB: size, elements, float, sum, time, algbw, busbw, 0 wrong.
  for ((bytes = 8; bytes <= 64 << 20; bytes *= 2)); do
    grep -qE "^ +$bytes +$((bytes / 4)) +float +sum +[0-9.]+ +[0-9.]+ +[0-9.]+ +0\$" <<<"$output"
  done
  [[ $output == *"average bus bandwidth: "*" GB/s over 24 size(s)"* ]]
  [[ $output =~ rank\ 0\ \(node1\)\ -\>\ rank\ 1\ \(node2\)\ +[0-9.]+\ GB/s ]]
  [[ $output =~ rank\ 1\ \(node2\)\ -\>\ rank\ 0\ \(node1\)\ +[0-9.]+\ GB/s ]]
  [[ $output == *"allreduce: ok"* || $output == *"allreduce: WARN"* ]]
  # A floor no network here reaches fails the run, naming it.
  run srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 64K --min-busbw 1000
  [ "$status" -eq 1 ]
  [[ $output =~ allreduce:\ FAIL:\ bus\ bandwidth\ [0-9.]+\ GB/s\ at\ 64\ KiB\ is\ below\ --min-busbw\ 1000 ]]
}

@test "doctor --allreduce: node3's network throttled both ways (tc) is named the slow node" {
  veth=sltr${TEST_CLUSTER_PORT}v3 ns=sltr${TEST_CLUSTER_PORT}-node3
  tc qdisc add dev "$veth" root tbf rate 100mbit burst 64kb latency 100ms
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 100mbit burst 64kb latency 100ms
  run srun --mpi=pmix -N3 -n3 "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 1M --allreduce-seconds 20
  tc qdisc del dev "$veth" root
  ip netns exec "$ns" tc qdisc del dev eth0 root
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"links (1 MiB a message, each link alone, a ring of one rank a node):"* ]]
  [[ $output == *"node node3 is slow: its links in and out run at "* ]]
  [[ $output == *"allreduce: WARN: a slow link (above)"* ]]
}

@test "doctor --allreduce alone on the login node: one rank, every size, no link; a bad size is refused" {
  run "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 4K
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"1 rank(s) on 1 node(s); float32 sums in place, 8 B to 4 KiB"* ]]
  [[ $output == *"no link to test (one rank)"* ]]
  [[ $output == *"allreduce: ok"* ]]
  run "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 64MB
  [ "$status" -eq 2 ]
  [[ $output == *"message size '64MB': expected bytes from 8 to 16G, as 4096, 512K, 64M or 1G"* ]]
  run "$BUILD/bin/slurm-train" doctor --node --allreduce
  [ "$status" -eq 2 ]
  [[ $output == *"--node excludes --allreduce"* ]]
}
