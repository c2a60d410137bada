#!/usr/bin/env bats
# spank_train.so on a one-node cluster with four fake GPUs: per-task binding for each mode,
# rendezvous variables, NCCL profiles and their precedence, sbatch, warnings, and every bad
# option failing before any task starts. The site arguments point the plugin at the 4-GPU
# single-socket fixture topology and the fixture profiles folder.

load helpers

setup_file() {
  [ -f "$BUILD/lib/spank_train.so" ] || return 0
  export SITE_ARGS="profiles=$ROOT/test/fixtures/profiles default_profile=tcp port_range=30100-30199 sysfs=$ROOT/test/fixtures/sysfs/ws-4gpu-1socket"
  start_test_cluster --gpus 4 --plugstack-args "$SITE_ARGS"
}

teardown_file() {
  stop_test_cluster
}

setup() {
  [ -f "$BUILD/lib/spank_train.so" ] || skip "spank_train.so was not built (no /usr/include/slurm/spank.h)"
  unset SLURM_TRAIN_BIND SLURM_TRAIN_NCCL SLURM_TRAIN_ENV SLURM_TRAIN_VERBOSE
}

# What each task sees, one sorted line per task.
TASK_VIEW='echo "$SLURM_PROCID cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE lworld=$LOCAL_WORLD_SIZE node=$NODE_RANK addr=$MASTER_ADDR omp=${OMP_NUM_THREADS-unset} bind=$SLURM_TRAIN_BIND"'

# Checks the lines of a 4-task step: rendezvous variables, and the expected devices per task.
check_four_tasks() { # check_four_tasks OUTPUT CVD0 CVD1 CVD2 CVD3 OMP
  local output=$1 i cvd
  [ "$(wc -l <<<"$output")" -eq 4 ]
  for i in 0 1 2 3; do
    cvd=${*:$((i + 2)):1}
    grep -qx "$i cvd=$cvd order=PCI_BUS_ID rank=$i local=$i world=4 lworld=4 node=0 addr=node1 omp=$6 bind=$7" <<<"$output" ||
      { echo "task $i: expected cvd=$cvd omp=$6 bind=$7 in:"; echo "$output"; return 1; }
  done
}

@test "the options are shown in srun, sbatch and salloc --help under the plugin" {
  for cmd in srun sbatch salloc; do
    run "$cmd" --help
    [ "$status" -eq 0 ]
    [[ $output == *"Options provided by plugins:"*"--train-bind=soft|strict|none"*"spank_train: GPU/CPU binding"* ]]
    [ "$(grep -c 'spank_train: ' <<<"$output")" -eq 4 ]
    [[ $output == *"--train-nccl=PROFILE|off"* ]]
    [[ $output == *"--train-env=on|off"* ]]
    [[ $output == *"--train-verbose"*"SLURM_TRAIN_VERBOSE=1"* ]]
  done
}

@test "soft (the default): every task sees all four GPUs, its own first" {
  run --separate-stderr srun -n4 --gres=gpu:4 bash -c "$TASK_VIEW"
  [ "$status" -eq 0 ]
  check_four_tasks "$output" 0,1,2,3 1,0,2,3 2,0,1,3 3,0,1,2 1 soft
  [ -z "$stderr" ]
}

@test "strict: every task sees only its own GPU" {
  run --separate-stderr srun -n4 --gres=gpu:4 --train-bind=strict bash -c "$TASK_VIEW"
  [ "$status" -eq 0 ]
  check_four_tasks "$output" 0 1 2 3 1 strict
}

@test "strict with two tasks: each its share of two GPUs" {
  run --separate-stderr srun -n2 --gres=gpu:4 --train-bind=strict bash -c 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(sort <<<"$output")" = "$(printf '0 0,1\n1 2,3')" ]
}

@test "none: CUDA_VISIBLE_DEVICES, CPUs and threads stay as Slurm set them" {
  run --separate-stderr srun -n4 --gres=gpu:4 --train-bind=none bash -c "$TASK_VIEW"
  [ "$status" -eq 0 ]
  [ "$(wc -l <<<"$output")" -eq 4 ]
  for i in 0 1 2 3; do
    grep -qx "$i cvd=0,1,2,3 order=.* rank=$i local=$i world=4 lworld=4 node=0 addr=node1 omp=unset bind=none" <<<"$output"
  done
}

@test "SLURM_TRAIN_BIND gives the default; the option wins over it" {
  SLURM_TRAIN_BIND=strict run --separate-stderr srun -n2 --gres=gpu:2 bash -c 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
  [ "$(sort <<<"$output")" = "$(printf '0 0\n1 1')" ]
  SLURM_TRAIN_BIND=strict run --separate-stderr srun -n2 --gres=gpu:2 --train-bind=soft bash -c 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
  [ "$(sort <<<"$output")" = "$(printf '0 0,1\n1 1,0')" ]
}

# "0-2,5" -> "0 1 2 5"
expand_cpus() {
  local part out=()
  for part in ${1//,/ }; do
    if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
  done
  echo "${out[@]}"
}

@test "CPUs: each task is bound inside the CPUs Slurm allowed, OMP_NUM_THREADS matches" {
  allowed=" $(expand_cpus "$(taskset -pc "$(cat "$TEST_CLUSTER_DIR/run/slurmd-node1.pid")" | sed 's/.*: //')") "
  run --separate-stderr srun -n2 bash -c 'echo "$SLURM_TRAIN_CPUS $OMP_NUM_THREADS $(taskset -pc $$ | sed "s/.*: //")"'
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  used=()
  for line in "${lines[@]}"; do
    read -r reported omp actual <<<"$line"
    [ "$reported" = "$actual" ]                      # the affinity really is the reported set
    cpus=($(expand_cpus "$actual"))
    [ "$omp" -eq "${#cpus[@]}" ]
    for c in "${cpus[@]}"; do [[ $allowed == *" $c "* ]]; done   # never wider than Slurm's
    used+=("${cpus[@]}")
  done
  # Two tasks on a node with at least two CPUs share none.
  [ "$(wc -w <<<"$allowed")" -lt 2 ] || [ "$(printf '%s\n' "${used[@]}" | sort | uniq -d | wc -l)" -eq 0 ]
}

@test "rendezvous: one MASTER_PORT per step, in the site's range, and different between steps" {
  run --separate-stderr srun -n2 bash -c 'echo $MASTER_PORT'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "${lines[1]}" ]
  first=${lines[0]}
  [ "$first" -ge 30100 ] && [ "$first" -le 30199 ]
  # Two steps of one job (salloc's allocation) get different ports.
  run salloc -n1 bash -c 'srun -n1 bash -c "echo \$SLURM_JOB_ID.\$SLURM_STEP_ID \$MASTER_PORT"; srun -n1 bash -c "echo \$SLURM_JOB_ID.\$SLURM_STEP_ID \$MASTER_PORT"'
  [ "$status" -eq 0 ]
  steps=$(grep -E '^[0-9]+\.[0-9]+ [0-9]+$' <<<"$output")
  [ "$(wc -l <<<"$steps")" -eq 2 ]
  [ "$(cut -d' ' -f2 <<<"$steps" | sort -u | wc -l)" -eq 2 ]
}

@test "--train-env=off (and SLURM_TRAIN_ENV=off) exports no rendezvous variable" {
  run --separate-stderr srun -n1 --train-env=off bash -c 'echo "[${RANK-}${LOCAL_RANK-}${WORLD_SIZE-}${MASTER_ADDR-}${MASTER_PORT-}${NODE_RANK-}] $SLURM_TRAIN_ENV"'
  [ "$output" = "[] off" ]
  SLURM_TRAIN_ENV=off run --separate-stderr srun -n1 bash -c 'echo "[${RANK-}${MASTER_PORT-}]"'
  [ "$output" = "[]" ]
}

@test "NCCL: the site's default profile, a site file, off, and the precedence option > export > profile" {
  run --separate-stderr srun -n1 bash -c 'echo "$SLURM_TRAIN_NCCL $NCCL_IB_DISABLE $NCCL_SOCKET_NTHREADS"'
  [ "$output" = "tcp 1 4" ]
  run --separate-stderr srun -n1 --train-nccl=lab bash -c 'echo "$SLURM_TRAIN_NCCL $NCCL_SOCKET_IFNAME $NCCL_DEBUG"'
  [ "$output" = "lab eth,lo WARN" ]
  run --separate-stderr srun -n1 --train-nccl=off bash -c 'env | grep -c ^NCCL_ || true'
  [ "$output" = 0 ]
  # What the user exported beats the site's default profile...
  NCCL_SOCKET_NTHREADS=9 run --separate-stderr srun -n1 bash -c 'echo $NCCL_SOCKET_NTHREADS'
  [ "$output" = 9 ]
  # ... and an explicit --train-nccl beats what the user exported.
  NCCL_SOCKET_NTHREADS=9 run --separate-stderr srun -n1 --train-nccl=tcp bash -c 'echo $NCCL_SOCKET_NTHREADS'
  [ "$output" = 4 ]
  SLURM_TRAIN_NCCL=lab run --separate-stderr srun -n1 bash -c 'echo $SLURM_TRAIN_NCCL'
  [ "$output" = lab ]
}

@test "--train-verbose prints one line per task on stderr" {
  run --separate-stderr srun -n2 --gres=gpu:2 --train-verbose true
  [ "$status" -eq 0 ]
  [ "$(grep -c '^spank_train: host node1 rank' <<<"$stderr")" -eq 2 ]
  grep -q '^spank_train: host node1 rank 1 local rank 1 GPUs 1,0 CPUs [0-9,-]* bind soft profile tcp$' <<<"$stderr"
  SLURM_TRAIN_VERBOSE=1 run --separate-stderr srun -n1 true
  grep -q '^spank_train: host node1 rank 0 local rank 0' <<<"$stderr"
}

@test "warnings: Slurm's own per-task GPU binding, and an interface the node lacks" {
  run --separate-stderr srun -n2 --gpus-per-task=1 bash -c 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(sort <<<"$output")" = "$(printf '0 0\n1 1')" ]
  [ "$(grep -c 'spank_train: warning: node1: Slurm already bound GPUs per task' <<<"$stderr")" -eq 1 ]
  run --separate-stderr srun -n2 --train-nccl=wrongif true
  [ "$status" -eq 0 ]
  [ "$(grep -c 'warning: node1: NCCL_SOCKET_IFNAME==bond7 matches no interface on node1 (it has: .*lo' <<<"$stderr")" -eq 1 ]
}

@test "an sbatch job: its srun steps get the variables, the batch step does not" {
  out=$BATS_FILE_TMPDIR/sbatch.out
  run sbatch --parsable -n2 --gres=gpu:2 --train-bind=strict -o "$out" --wrap '
    echo "batch rank=[${RANK-}] port=[${MASTER_PORT-}]"
    srun -n2 bash -c "echo step1 \$SLURM_PROCID \$RANK \$LOCAL_RANK \$WORLD_SIZE \$MASTER_ADDR \$MASTER_PORT \$CUDA_VISIBLE_DEVICES"
    srun -n2 --train-bind=soft bash -c "echo step2 \$SLURM_PROCID \$RANK \$MASTER_PORT \$CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  run wait_job "$output" 60
  [ "$output" = COMPLETED ]
  cat "$out"
  grep -qx 'batch rank=\[\] port=\[\]' "$out"
  # sbatch's --train-bind=strict reaches the steps; the second step's own option overrides it.
  grep -qE '^step1 0 0 0 2 node1 301[0-9][0-9] 0$' "$out"
  grep -qE '^step1 1 1 1 2 node1 301[0-9][0-9] 1$' "$out"
  grep -qE '^step2 1 1 301[0-9][0-9] 1,0$' "$out"
  [ "$(grep '^step1' "$out" | cut -d' ' -f7 | sort -u)" != "$(grep '^step2' "$out" | cut -d' ' -f4 | sort -u)" ]
}

@test "every bad option or default stops srun and sbatch before any task starts" {
  marker=$BATS_TEST_TMPDIR/ran
  fails() { # fails EXPECTED-MESSAGE COMMAND...: non-zero, the message, no task ran
    local expected=$1
    shift
    run "$@"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ $output == *"spank_train: $expected"* ]]
    [ ! -e "$marker" ]
  }
  fails "--train-bind='loose': expected soft, strict or none" srun -n1 --train-bind=loose touch "$marker"
  fails "--train-env='yes': expected on or off" srun -n1 --train-env=yes touch "$marker"
  fails "--train-nccl '../x': expected a profile name" srun -n1 --train-nccl=../x touch "$marker"
  fails "--train-nccl=nope: NCCL profile 'nope' does not exist (available: ib, lab, off, roce, tcp, wrongif)" \
    srun -n1 --train-nccl=nope touch "$marker"
  fails "--train-bind is given twice with different values ('soft' and 'strict')" \
    srun -n1 --train-bind=soft --train-bind=strict touch "$marker"
  fails "--train-bind 'soft\\x0a' contains a newline" srun -n1 "--train-bind=soft"$'\n' touch "$marker"
  fails "SLURM_TRAIN_BIND='tight' (the default of --train-bind): expected soft, strict or none" \
    env SLURM_TRAIN_BIND=tight srun -n1 touch "$marker"
  fails "SLURM_TRAIN_NCCL=nope: NCCL profile 'nope' does not exist" env SLURM_TRAIN_NCCL=nope srun -n1 touch "$marker"
  fails "--train-bind='loose'" sbatch --train-bind=loose --wrap "touch $marker"
  fails "SLURM_TRAIN_ENV='maybe' (the default of --train-env)" env SLURM_TRAIN_ENV=maybe sbatch --wrap "touch $marker"
  fails "--train-env='no'" salloc --train-env=no touch "$marker"
}

@test "an error only the node sees (a bad default exported to the job) fails every task" {
  run srun -n2 --export=ALL,SLURM_TRAIN_BIND=tight bash -c 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output != *ran* ]]
  [[ $output == *"spank_train: SLURM_TRAIN_BIND='tight' (the default of --train-bind)"* ]]
}

@test "every bad plugstack.conf argument is fatal for srun and sbatch, with a clear message" {
  conf=$BATS_TEST_TMPDIR/etc
  mkdir -p "$conf"
  sed "s|^PlugStackConfig=.*|PlugStackConfig=$conf/plugstack.conf|" "$SLURM_CONF" >"$conf/slurm.conf"
  bad() { # bad EXPECTED-MESSAGE ARGS...
    local expected=$1
    shift
    echo "required $BUILD/lib/spank_train.so $*" >"$conf/plugstack.conf"
    for cmd in "srun -n1 true" "sbatch --wrap true"; do
      SLURM_CONF=$conf/slurm.conf run $cmd
      echo "$cmd: $output"
      [ "$status" -ne 0 ]
      [[ $output == *"spank_train: $expected"* ]]
    done
  }
  bad "plugstack.conf: unknown key 'colour'" colour=blue
  bad "plugstack.conf bind='loose': expected soft, strict or none" bind=loose
  bad "plugstack.conf env='yes': expected on or off" env=yes
  bad "plugstack.conf port_range= low port '80': expected a whole number from 1024 to 65535" port_range=80-90
  bad "plugstack.conf port_range= '30000-20000': the range runs backwards" port_range=30000-20000
  bad "plugstack.conf profiles= '/no/such/dir': no such folder" profiles=/no/such/dir
  bad "plugstack.conf profiles= 'relative': expected an absolute path" profiles=relative
  bad "plugstack.conf default_profile=fast: NCCL profile 'fast' does not exist" default_profile=fast
  bad "plugstack.conf: bind= is given twice" bind=soft bind=strict
  bad "plugstack.conf argument 'strict': expected KEY=VALUE" strict
  # A site profile that sets a debugging key it did not allow is refused as the default.
  mkdir -p "$BATS_TEST_TMPDIR/profiles"
  echo "NCCL_ALGO=Ring" >"$BATS_TEST_TMPDIR/profiles/fast.conf"
  bad "plugstack.conf default_profile=fast: $BATS_TEST_TMPDIR/profiles/fast.conf:1: NCCL_ALGO is a debugging key" \
    profiles=$BATS_TEST_TMPDIR/profiles default_profile=fast
  # A symbolic link in the profiles folder is refused, not followed: nothing of the file it
  # points to reaches the message.
  echo "root:s3cret-hash:19000:0:99999:7:::" >"$BATS_TEST_TMPDIR/secret"
  ln -s "$BATS_TEST_TMPDIR/secret" "$BATS_TEST_TMPDIR/profiles/leak.conf"
  bad "plugstack.conf default_profile=leak: $BATS_TEST_TMPDIR/profiles/leak.conf: a symbolic link" \
    profiles=$BATS_TEST_TMPDIR/profiles default_profile=leak
  [[ $output != *s3cret* ]]
}

@test "slurmd refuses to start with a bad plugstack.conf argument, saying why" {
  conf=$BATS_TEST_TMPDIR/etc
  mkdir -p "$conf/spool"
  # A second slurmd for node1 on another port, with its own files: it must stop at init.
  sed -e "s|^PlugStackConfig=.*|PlugStackConfig=$conf/plugstack.conf|" \
    -e "s|^SlurmdPort=.*|SlurmdPort=$((TEST_CLUSTER_PORT + 2))|" \
    -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$conf/slurmd.pid|" \
    -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$conf/slurmd.log|" \
    -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$conf/spool|" "$SLURM_CONF" >"$conf/slurm.conf"
  echo "required $BUILD/lib/spank_train.so colour=blue" >"$conf/plugstack.conf"
  run timeout 30 slurmd -D -N node1 -f "$conf/slurm.conf"
  echo "$output"
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  grep -q "spank_train: plugstack.conf: unknown key 'colour'" "$conf/slurmd.log"
  grep -q "slurmd initialization failed" "$conf/slurmd.log"
}

@test "PyTorch (gloo, env://) forms its group and all-reduces under plain srun -n2" {
  /usr/bin/python3 -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
  run srun -n2 /usr/bin/python3 "$ROOT/test/integration/torch_allreduce.py"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'sum 3 expected 3: ok' <<<"$output")" -eq 2 ]
}
