#!/usr/bin/env bats
# slurm-train doctor on a login node and inside a two-node job with the plugin and fake GPUs.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2 --gpus 2
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
