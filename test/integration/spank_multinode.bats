#!/usr/bin/env bats
# spank_train.so on a two-node cluster (each node its own host, two fake GPUs each): the
# rendezvous variables across nodes, an sbatch -N2 job, and PyTorch over gloo with -N2 -n4.

load helpers

setup_file() {
  [ -f "$BUILD/lib/spank_train.so" ] || return 0
  start_test_cluster --nodes 2 --gpus 2 --plugstack-args "default_profile=tcp"
}

teardown_file() {
  stop_test_cluster
}

setup() {
  [ -f "$BUILD/lib/spank_train.so" ] || skip "spank_train.so was not built (no /usr/include/slurm/spank.h)"
}

@test "srun -N2 -n4: MASTER_ADDR is the first node, NODE_RANK and the ranks follow Slurm's" {
  run --separate-stderr srun -N2 -n4 --ntasks-per-node=2 --gres=gpu:2 bash -c \
    'echo "$(hostname) $SLURM_PROCID rank=$RANK local=$LOCAL_RANK node=$NODE_RANK world=$WORLD_SIZE lworld=$LOCAL_WORLD_SIZE addr=$MASTER_ADDR port=$MASTER_PORT cvd=$CUDA_VISIBLE_DEVICES"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 4 ]
  for line in "${lines[@]}"; do
    read -r host procid rest <<<"$line"
    [[ $rest == "rank=$procid "* ]]
    [[ $rest == *" world=4 lworld=2 addr=node1 "* ]]
    if [ "$host" = node1 ]; then [[ $rest == *" node=0 "* ]]; else [[ $rest == *" node=1 "* ]]; fi
  done
  # Block distribution: ranks 0,1 on node1 and 2,3 on node2, each node's local ranks 0 and 1,
  # each task its own GPU first.
  sorted=$(sort -k2n <<<"$output" | awk '{print $1, $2, $4, $NF}')
  [ "$sorted" = "$(printf 'node1 0 local=0 cvd=0,1\nnode1 1 local=1 cvd=1,0\nnode2 2 local=0 cvd=0,1\nnode2 3 local=1 cvd=1,0')" ]
  [ "$(grep -o 'port=[0-9]*' <<<"$output" | sort -u | wc -l)" -eq 1 ]
}

@test "a step on the second node alone has it as MASTER_ADDR and NODE_RANK 0" {
  run --separate-stderr srun -N1 -n1 -w node2 bash -c 'echo "$(hostname) $MASTER_ADDR $NODE_RANK $RANK"'
  [ "$status" -eq 0 ]
  [ "$output" = "node2 node2 0 0" ]
}

@test "an sbatch -N2 job: its srun step gets the variables on both nodes, the batch step none" {
  out=$BATS_FILE_TMPDIR/job.out
  run sbatch --parsable -N2 --ntasks-per-node=2 -o "$out" --wrap '
    echo "batch on $(hostname) rank=[${RANK-}]"
    srun bash -c "echo step \$(hostname) \$RANK \$NODE_RANK \$WORLD_SIZE \$MASTER_ADDR"'
  [ "$status" -eq 0 ]
  run wait_job "$output" 60
  [ "$output" = COMPLETED ]
  cat "$out"
  grep -qx 'batch on node1 rank=\[\]' "$out"
  [ "$(grep '^step ' "$out" | sort -k3n)" = "$(printf 'step node1 0 0 4 node1\nstep node1 1 0 4 node1\nstep node2 2 1 4 node1\nstep node2 3 1 4 node1')" ]
}

@test "an NCCL_SOCKET_IFNAME no node has gets one warning per node, naming it and its interfaces" {
  NCCL_SOCKET_IFNAME=ib0 run --separate-stderr srun -N2 -n4 true
  [ "$status" -eq 0 ]
  echo "$stderr"
  [ "$(grep -c 'spank_train: warning: node1: NCCL_SOCKET_IFNAME=ib0 matches no interface on node1 (it has: lo, eth0)' <<<"$stderr")" -eq 1 ]
  [ "$(grep -c 'spank_train: warning: node2: NCCL_SOCKET_IFNAME=ib0 matches no interface on node2 (it has: lo, eth0)' <<<"$stderr")" -eq 1 ]
}

@test "PyTorch (gloo, env://) under plain srun -N2 -n4 forms its group across nodes and all-reduces" {
  /usr/bin/python3 -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
  run srun -N2 -n4 /usr/bin/python3 "$ROOT/test/integration/torch_allreduce.py"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'sum 10 expected 10: ok' <<<"$output")" -eq 4 ]
  # Slurm places the four tasks on both nodes (3+1 here: each node declares four CPUs).
  grep -q ' host node1 ' <<<"$output"
  grep -q ' host node2 ' <<<"$output"
}
