# Shared by the integration tests: paths, and a private cluster per test file.
bats_require_minimum_version 1.5.0  # run --separate-stderr
ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
CLUSTER_SH=$ROOT/scripts/cluster.sh
# Not the demo's port (6917): the tests run beside a demo cluster left running.
TEST_CLUSTER_PORT=${TEST_CLUSTER_PORT:-6937}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Rank logs of the runs under test go under the build tree, not into the working folder.
export SLURM_TRAIN_LOG_DIR=${SLURM_TRAIN_LOG_DIR:-$BUILD/test/logs}

# start_test_cluster [cluster.sh start options]: one cluster per test file, under the build tree
# (in $TEST_CLUSTER_IN instead when the test file sets it).
start_test_cluster() {
  export TEST_CLUSTER_DIR=${TEST_CLUSTER_IN:-$BUILD/test/clusters/$(basename "$BATS_TEST_FILENAME" .bats)}
  # The plugin of this build (never sanitized, see the Makefile), or none when it is not built;
  # exported, so that the tests' own cluster.sh calls name the same one.
  export SLURM_TRAIN_CLUSTER_PLUGIN=$BUILD/lib/spank_train.so
  [ -f "$SLURM_TRAIN_CLUSTER_PLUGIN" ] || SLURM_TRAIN_CLUSTER_PLUGIN=none
  "$CLUSTER_SH" start --dir "$TEST_CLUSTER_DIR" --port "$TEST_CLUSTER_PORT" "$@"
  eval "$("$CLUSTER_SH" env --dir "$TEST_CLUSTER_DIR")"
}

stop_test_cluster() {
  [ -z "${TEST_CLUSTER_DIR:-}" ] || "$CLUSTER_SH" stop --dir "$TEST_CLUSTER_DIR"
}

# wait_job JOBID [SECONDS]: poll slurmctld until the job ends; prints its final state.
# (sbatch --wait polls every 10 s; this answers within a fraction of a second.)
wait_job() {
  local id=$1 deadline=$((SECONDS + ${2:-60})) state
  while :; do
    state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)
        echo "$state"; return 0 ;;
    esac
    if [ $SECONDS -ge $deadline ]; then echo "TIMEOUT_WAITING($state)"; return 1; fi
    sleep 0.2
  done
}

# wait_for_running_step [SECONDS]: until a job step of the cluster runs.
wait_for_running_step() {
  local deadline=$((SECONDS + ${1:-30}))
  until [ -n "$(squeue -h -s -t RUNNING 2>/dev/null)" ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# cluster_processes DIR: "pid command" of every live process of the cluster in DIR: its daemons
# (marked by SLURM_TRAIN_CLUSTER), slurmstepd (which keeps its node's log under DIR open), and
# its jobs' tasks and batch scripts (its SLURM_CONF and a SLURMD_NODENAME). Client commands such
# as srun are not included.
cluster_processes() {
  local dir=$1 p env
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" != "$BASHPID" ] || continue
    env=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
    if grep -qxF "SLURM_TRAIN_CLUSTER=$dir" <<<"$env" ||
      { grep -qxF "SLURM_CONF=$dir/etc/slurm.conf" <<<"$env" && grep -q '^SLURMD_NODENAME=' <<<"$env"; } ||
      ls -l "$p/fd" 2>/dev/null | grep -qF -- "-> $dir/"; then
      echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
    fi
  done
}

# set_small_args: SMALL, a small and quick variant of the reference configuration as run
# arguments (after ensure_fashion_mnist).
set_small_args() {
  SMALL=(--config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5"
    --data.test "$TEST_DATA/test.h5" --model.hidden "[64,32]" --train.metrics "" --train.eval_batch 2000
    --train.global_batch 250)
}

# user_home: the home folder of a new user (a copy of /etc/skel, one a test file), for the tests'
# clean login shells: what the README promises a user, without this machine's own dotfiles (root's
# pyenv or conda, whose rehash lock, left behind by a killed shell, stalls every login a minute).
user_home() {
  local home=$BATS_FILE_TMPDIR/home
  [ -d "$home" ] || cp -r /etc/skel "$home"
  echo "$home"
}

# on_gpus FACTS COMMAND...: COMMAND under srun (the file's cluster), 2 ranks on 2 nodes, the
# stand-in NVML reading test/fixtures/nvml/FACTS.facts, each rank given the GPU of its own
# number (what the plugin's binding gives on a node of 2 GPUs).
on_gpus() {
  local facts=$ROOT/test/fixtures/nvml/$1.facts
  shift
  SLURM_TRAIN_NVML_LIBRARY=$BUILD/test/nvml-stand-in/libnvidia-ml.so.1 NVML_STAND_IN=$facts \
    timeout 180 srun --mpi=pmix -N2 --ntasks-per-node=1 bash -c 'CUDA_VISIBLE_DEVICES=$SLURM_PROCID exec "$@"' bash "$@"
}

# Fashion-MNIST in HDF5 under the build tree, imported once and shared by the test files (the
# lock: files run side by side in make test, and the first imports while the others wait).
ensure_fashion_mnist() {
  export TEST_DATA=$BUILD/test/data/fashion-mnist
  mkdir -p "$(dirname "$TEST_DATA")"
  (
    flock 9
    [ -f "$TEST_DATA/train.h5" ] && [ -f "$TEST_DATA/test.h5" ] && exit 0
    "$BUILD/bin/slurm-train" data import fashion-mnist --out "$TEST_DATA" >/dev/null
  ) 9>"$TEST_DATA.lock"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=/usr/bin/python3
