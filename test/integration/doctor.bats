#!/usr/bin/env bats
# make test: alone
# slurm-train doctor on a login node and inside jobs of two and three nodes with the plugin and fake
# GPUs; doctor --allreduce's bandwidth by size, and a node whose network is throttled (tc) named.
# Alone: the local cluster's links are veths, whose bandwidth is the CPU's, so other tests' load
# moves what the sweep measures (under three lanes, Open MPI once failed a TCP connect to rank 0
# while node3 was throttled).

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
  run timeout 240 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" doctor --allreduce
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
  run timeout 120 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 64K --min-busbw 1000
  [ "$status" -eq 1 ]
  [[ $output =~ allreduce:\ FAIL:\ bus\ bandwidth\ [0-9.]+\ GB/s\ at\ 64\ KiB\ is\ below\ --min-busbw\ 1000 ]]
}

@test "doctor --allreduce under srun without an MPI plugin: one line saying to add --mpi=pmix, exit 2" {
  run timeout 60 srun --mpi=none -N2 -n2 "$BUILD/bin/slurm-train" doctor --allreduce
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c 'srun started 2 tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)' <<<"$output")" -eq 1 ]
  [ "$(grep -vcE -e 'srun started 2 tasks' -e '^srun: error: node[0-9]+: tasks? [0-9,-]+: Exited with exit code 2$' <<<"$output")" -eq 0 ]
}

@test "doctor --allreduce: node3's network throttled both ways (tc) is named the slow node" {
  veth=sltr${TEST_CLUSTER_PORT}v3 ns=sltr${TEST_CLUSTER_PORT}-node3 out=$BATS_TEST_TMPDIR/out
  # The throttle comes once the ranks are connected (the sweep's header): Open MPI's TCP connect
  # gives up on a peer whose handshake is slow, and the test is of the doctor, not of that.
  timeout 240 srun --mpi=pmix -N3 -n3 "$BUILD/bin/slurm-train" doctor --allreduce --allreduce-max 1M \
    --allreduce-seconds 20 >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do grep -q 'size(B)' "$out" && break; sleep 0.1; done
  tc qdisc add dev "$veth" root tbf rate 100mbit burst 64kb latency 100ms
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 100mbit burst 64kb latency 100ms
  status=0
  wait "$pid" || status=$?
  tc qdisc del dev "$veth" root
  ip netns exec "$ns" tc qdisc del dev eth0 root
  cat "$out"
  [ "$status" -eq 0 ]
  grep -q "links (1 MiB a message, each link alone, a ring of one rank a node):" "$out"
  grep -q "node node3 is slow: its links in and out run at " "$out"
  grep -q "allreduce: WARN: a slow link (above)" "$out"
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

# with_gpu_files MODE: device files for the stand-in's GPUs (minors 250 to 253, above any real
# GPU's), removed by teardown; a real driver's files are character devices, these plain files.
with_gpu_files() {
  for m in 250 251 252 253; do
    [ ! -e "/dev/nvidia$m" ] || skip "/dev/nvidia$m exists on this machine"
  done
  for m in 250 251 252 253; do
    install -m "$1" /dev/null "/dev/nvidia$m"
    echo "/dev/nvidia$m" >>"$BATS_TEST_TMPDIR/gpu-files"
  done
}

teardown() {
  if [ -f "$BATS_TEST_TMPDIR/gpu-files" ]; then xargs rm -f <"$BATS_TEST_TMPDIR/gpu-files"; fi
}

stand_in() {
  SLURM_TRAIN_NVML_LIBRARY=$BUILD/test/nvml-stand-in/libnvidia-ml.so.1 NVML_STAND_IN=$ROOT/test/fixtures/nvml/$1.facts \
    "${@:2}"
}

@test "doctor on an unhealthy GPU node (NVML stand-in): old driver, missing architecture, MIG, ECC, rows, each with its fix" {
  "$BUILD/bin/slurm-train" --version | grep -q "CUDA: *built in" ||
    skip "this build has no CUDA (no nvcc when it was built): it judges no driver or architecture"
  with_gpu_files 0666
  run stand_in unhealthy-node "$BUILD/bin/slurm-train" doctor --node
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL  GPU driver   driver 470.256.02 (CUDA 11.4) is older than the CUDA "*" this build needs: every CUDA call fails with cudaErrorInsufficientDriver; install a driver for CUDA "*" or newer on this node"* ]]
  [[ $output == *"OK    GPU 0        NVIDIA H100 80GB HBM3 GPU-0a0a0a0a-1111-2222-3333-444444444444 compute capability 9.0, MIG on: MIG-1b1b1b1b-1111-2222-3333-444444444444 MIG-2c2c2c2c-1111-2222-3333-444444444444, 3 corrected ECC errors"* ]]
  [[ $output == *"FAIL  GPU 1        compute capability 7.0 is not among this build's architectures (sm_80, sm_90, compute_90 PTX): every kernel fails with \"no kernel image is available for execution on the device\"; rebuild with CUDA_ARCHS including 70"* ]]
  [[ $output == *"WARN  GPU 1        persistence mode is off"*"(nvidia-smi -pm 1, or run nvidia-persistenced)"* ]]
  [[ $output == *"FAIL  GPU 2        4 uncorrected ECC error(s) since the last reset: results may be wrong; drain the node and reset the GPU (nvidia-smi -r)"* ]]
  [[ $output == *"FAIL  GPU 2        a remapped memory row is pending: it takes effect at the next GPU reset (nvidia-smi -r)"* ]]
  [[ $output == *"FAIL  GPU 3        MIG is enabled with no instance"* ]]
  # The in-job supervisor's line: this node is left out of a restart.
  [[ ${lines[-1]} =~ ^node-check\ [^\ ]+\ FAIL:\ GPU\ driver:\ driver\ 470.256.02 ]]
}

@test "doctor on a healthy GPU node (NVML stand-in): the driver and each GPU OK; under a job's MPI ranks too" {
  with_gpu_files 0666
  run stand_in healthy-node "$BUILD/bin/slurm-train" doctor --node
  echo "$output"
  [[ $output == *"OK    GPU driver   driver 580.65.06 (CUDA 13.0)"* ]]
  [[ $output == *"OK    GPU 0        NVIDIA H100 80GB HBM3 GPU-0a0a0a0a-1111-2222-3333-444444444444 compute capability 9.0"* ]]
  [[ $output == *"OK    GPU 1        NVIDIA H100 80GB HBM3 GPU-1a1a1a1a-1111-2222-3333-444444444444 compute capability 9.0"* ]]
  [[ $output != *"FAIL  GPU"* ]]
  run stand_in healthy-node timeout 120 srun --mpi=pmix -N1 -n2 "$BUILD/bin/slurm-train" doctor
  echo "$output"
  [[ $output == *"OK    GPU 1        NVIDIA H100 80GB HBM3"* ]]
}

@test "doctor: a GPU whose device file this user may not open fails naming it; a GPU not given is not opened" {
  with_gpu_files 0600
  run stand_in healthy-node setpriv --reuid=65534 --regid=65534 --clear-groups "$BUILD/bin/slurm-train" doctor --node
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL  GPU 0        this process may not open /dev/nvidia250: Permission denied: the GPU is not this job's (ask Slurm for it: --gpus or --gres=gpu) or the device files' permissions exclude the user"* ]]
  [[ $output == *"FAIL  GPU 1        this process may not open /dev/nvidia251: Permission denied"* ]]
  CUDA_VISIBLE_DEVICES=GPU-1a1a1a1a run stand_in healthy-node setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$BUILD/bin/slurm-train" doctor --node
  echo "$output"
  [[ $output == *"OK    GPU 0        NVIDIA H100"* ]]
  [[ $output == *"FAIL  GPU 1        this process may not open /dev/nvidia251: Permission denied"* ]]
}

@test "doctor where NVML cannot be loaded: one WARN naming the library and why" {
  run env SLURM_TRAIN_NVML_LIBRARY="$BATS_TEST_TMPDIR/libnvidia-ml.so.1" "$BUILD/bin/slurm-train" doctor --node
  echo "$output"
  [[ $output == *"WARN  GPU health   NVML ($BATS_TEST_TMPDIR/libnvidia-ml.so.1) cannot be loaded: "*"(no NVIDIA driver on this node?): the GPUs' driver, ECC and MIG are not checked"* ]]
  [ "$(grep -c 'GPU health' <<<"$output")" -eq 1 ]
}
