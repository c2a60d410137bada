#!/usr/bin/env bats
# slurm-train exec on a two-node cluster: a PyTorch DDP script (gloo) under the supervisor, a rank
# killed, a rank that hangs, the sbatch example signalled by Slurm (checkpoint, requeue, resume,
# the loss of an uninterrupted run), programs that cannot run, and the usage errors.

load helpers

setup_file() {
  start_test_cluster --nodes 2 --plugstack-args "default_profile=tcp"
}

teardown_file() {
  stop_test_cluster
}

setup() {
  ST=$BUILD/bin/slurm-train
  DDP=$ROOT/examples/pytorch_ddp.py
  LOGS=$BATS_TEST_TMPDIR/logs
}

need_torch() {
  $PY -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
}

# pid_in_log LOG RANK: the pid rank RANK's program printed at its start ("rank R of W on HOST pid P").
pid_in_log() {
  sed -n "s/.* rank $2: rank $2 of [0-9]* on [^ ]* pid \([0-9]*\)$/\1/p" "$1" | tail -1
}

@test "exec: srun -N2 -n4 runs the PyTorch DDP example to the end, every rank's output in its log with the time and rank" {
  need_torch
  run --separate-stderr srun -N2 -n4 "$ST" exec --log-dir "$LOGS" -- $PY "$DDP" --steps 60 --log-every 20
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"final loss "* ]]
  [[ $output == *"step 60/60 loss"* ]]
  # Rank 0's output is on the console; the others' stdout only in their logs.
  [[ $output != *"rank 3 of 4"* ]]
  job=$(ls "$LOGS")
  for r in 0 1 2 3; do
    log=$LOGS/$job/rank-$r.log
    grep -qE "^20[0-9-]+T[0-9:.]+Z rank $r: rank $r of 4 on node[12] pid [0-9]+$" "$log"
    grep -q "rank $r: the program (pid [0-9]*) exited with status 0" "$log"
    grep -q "rank $r: done (exit 0)" "$log"
  done
  grep -q "rank 0: final loss" "$LOGS/$job/rank-0.log"
}

@test "exec: an MPI program under srun --mpi=pmix starts and all-reduces through the supervisor" {
  run --separate-stderr srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 "$ST" exec --log-dir= -- "$BUILD/test/mpi_layout"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"allreduce sum 10 expected 10: ok"* ]]
  [ "$(grep -c ' host node1 ' <<<"$output")" -eq 2 ]
  [ "$(grep -c ' host node2 ' <<<"$output")" -eq 2 ]
}

@test "exec: the program gets the plugin's rendezvous variables, and the same ones from SLURM_* without it" {
  show='echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK $MASTER_ADDR"'
  run --separate-stderr srun -N2 -n4 "$ST" exec --log-dir= -- bash -c "$show >&2"
  [ "$status" -eq 0 ]
  with_plugin=$(sed 's/^\[rank [0-9]\] //' <<<"$stderr" | grep -E '^[0-9] ' | sort)
  run --separate-stderr srun -N2 -n4 --train-env=off "$ST" exec --log-dir= -- bash -c "$show >&2"
  [ "$status" -eq 0 ]
  derived=$(sed 's/^\[rank [0-9]\] //' <<<"$stderr" | grep -E '^[0-9] ' | sort)
  echo "$with_plugin"; echo "--"; echo "$derived"
  [ "$(wc -l <<<"$derived")" -eq 4 ]
  [ "$with_plugin" = "$derived" ]
  while read -r procid rank local world lworld node addr; do
    [ "$procid" = "$rank" ]
    [ "$world" = 4 ]
    [ "$addr" = node1 ]
  done <<<"$derived"
  # The heartbeat file is node-local and per rank, in a folder of its own that only the job's user
  # may enter (another user who could touch it would hide a hang).
  run srun -N1 -n1 "$ST" exec --log-dir= -- bash -c \
    'test -f "$SLURM_TRAIN_HEARTBEAT" && echo "$SLURM_TRAIN_HEARTBEAT" && stat -c "%a %U" "$(dirname "$SLURM_TRAIN_HEARTBEAT")"'
  [ "$status" -eq 0 ]
  [[ $output == *"/slurm-train-heartbeat."*"/heartbeat"* ]]
  [[ $output == *"700 $(id -un)"* ]]
}

@test "exec: SIGKILL of one rank's Python process ends the job within 10 s, task 0 naming rank, host, pid, signal and its last lines" {
  need_torch
  srun -N2 -n4 "$ST" exec --log-dir "$LOGS" -- $PY "$DDP" --steps 100000 --step-sleep 0.05 --log-every 1000 \
    >"$BATS_TEST_TMPDIR/out" 2>&1 &
  srun_pid=$!
  deadline=$((SECONDS + 90)) pid=
  until [ -n "$pid" ]; do
    [ $SECONDS -lt $deadline ] || { cat "$BATS_TEST_TMPDIR/out"; false; }
    sleep 0.2
    job=$(ls "$LOGS" 2>/dev/null || true)
    [ -z "$job" ] || pid=$(pid_in_log "$LOGS/$job/rank-2.log" 2 2>/dev/null || true)
  done
  sleep 3  # into the training
  host=$(grep -o "rank 2 of 4 on [a-z0-9]*" "$LOGS/$job/rank-2.log" | head -1 | awk '{print $NF}')
  # The nodes share this machine's process table: kill rank 2's Python itself.
  kill -9 "$pid"
  t0=$SECONDS
  status=0
  wait "$srun_pid" || status=$?
  elapsed=$((SECONDS - t0))
  out=$(cat "$BATS_TEST_TMPDIR/out")
  echo "$out"; echo "ended $elapsed s after the kill, status $status"
  [ "$status" -ne 0 ]
  [ "$elapsed" -le 10 ]
  [[ $out == *"ending the job: rank 2 on $host failed: its program python3 (pid $pid) was killed by signal 9 (SIGKILL)"* ]]
  [[ $out == *"last lines of its output:"*"  | rank 2 of 4 on $host pid $pid"* ]]
  # Every rank's program is gone.
  [ -z "$(pgrep -f "$DDP --steps 100000" || true)" ]
}

@test "exec: a rank whose program hangs (no output, no heartbeat) is named with the rank table; the job exits 4" {
  need_torch
  # 30 s: four ranks importing PyTorch beside other tests' lanes have taken more than 15 s to reach
  # their first step, which the watchdog rightly calls a hang at step 0.
  run --separate-stderr srun -N2 -n4 "$ST" exec --log-dir "$LOGS" --hang-timeout 30 -- \
    $PY "$DDP" --steps 100000 --step-sleep 0.02 --log-every 1000 --hang-at-step 30 --hang-rank 1
  echo "$output"; echo "$stderr"
  [ "$status" -eq 4 ]
  [[ $stderr == *"rank status (gathered by the watchdog, not through MPI)"* ]]
  [[ $stderr =~ \ 1\ +node[12]\ +[0-9]+\ +running\ +29\ +program ]]
  [[ $stderr == *"hang: rank 1 (node"*", pid "*") made no progress for 30 s in the program phase of step 29"* ]]
  [ -z "$(pgrep -f "$DDP --steps 100000" || true)" ]
}

@test "exec: examples/pytorch-ddp.sbatch, signalled by Slurm mid-run, checkpoints, is requeued, resumes, and ends with the uninterrupted run's loss" {
  need_torch
  work=$BATS_TEST_TMPDIR/ddp
  mkdir -p "$work"
  ln -s "$ROOT/examples" "$work/examples"
  ARGS=(--steps 240 --log-every 40 --step-sleep 0.1)
  (cd "$work" && srun -N2 -n4 "$ST" exec --log-dir= -- $PY "$DDP" "${ARGS[@]}" >uninterrupted.out 2>&1)
  expected=$(grep '^final loss' "$work/uninterrupted.out")
  [ -n "$expected" ]
  job=$(cd "$work" && PATH="$BUILD/bin:$PATH" PYTHON=$PY sbatch --parsable examples/pytorch-ddp.sbatch "${ARGS[@]}")
  out_file=$work/pytorch-ddp-$job.out
  deadline=$((SECONDS + 120))
  until grep -q "step 80/240" "$out_file" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$out_file"; false; }
    sleep 0.2
  done
  scancel --signal=USR1 "$job"
  run wait_job "$job" 400
  out=$(cat "$out_file")
  echo "$out"
  [ "$output" = COMPLETED ]
  [[ $out == *"received SIGUSR1: passed to the program"* ]]
  [[ $out == *"preempted by SIGUSR1 at step "*": checkpoint written to"* ]]
  [[ $out == *"preempted (SIGUSR1): its program reported step "*"; requeued job $job (exit 5)"* ]]
  [[ $out == *"(restart 1)"* ]]
  [[ $out == *"resumed from checkpoints/pytorch-ddp-$job.pt at step "* ]]
  [ "$(grep '^final loss' "$out_file")" = "$expected" ]
  restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
  [ "$restarts" -ge 1 ]
  # The logs hold both runs, appended; the restart record counts one run with progress.
  for r in 0 3; do
    log=$work/slurm-train-logs/$job/rank-$r.log
    [ "$(grep -c "rank $r: slurm-train .* exec: rank $r of 4" "$log")" -ge 2 ]
  done
  grep -q '^restarts_without_progress = 0$' "$work/slurm-train-logs/$job/restarts"
}

@test "exec: preempted runs that make no progress are not requeued forever (exit 7)" {
  log_dir=$BATS_TEST_TMPDIR/norequeue
  # Outside a requeueable job: the record still counts; a program that reports the same step each run.
  prog='echo 5 >"$SLURM_TRAIN_HEARTBEAT"; trap "exit 0" USR1; kill -USR1 $PPID; sleep 5 & wait'
  for i in 1 2 3; do
    run --separate-stderr env SLURM_JOB_ID=999001 "$ST" exec --log-dir "$log_dir" --max-restarts-without-progress 1 -- \
      bash -c "$prog"
    echo "$stderr"
  done
  [ "$status" -eq 7 ]
  [[ $stderr == *"not requeued: 2 runs in a row made no progress (more than --max-restarts-without-progress=1)"* ]]
}

@test "exec: a program that is not found or not executable is a clear error on every rank" {
  run -127 --separate-stderr srun -N2 -n4 "$ST" exec --log-dir= -- no-such-program-xyz --flag
  echo "$stderr"
  [ "$status" -eq 127 ]
  for r in 0 1 2 3; do
    [[ $stderr == *"slurm-train: error: rank $r of 4 on node"?": program 'no-such-program-xyz' not found on PATH"* ]]
  done
  printf 'echo hi\n' >"$BATS_TEST_TMPDIR/plain.sh"
  chmod 644 "$BATS_TEST_TMPDIR/plain.sh"
  run -126 --separate-stderr srun -N2 -n2 "$ST" exec --log-dir= -- "$BATS_TEST_TMPDIR/plain.sh"
  echo "$stderr"
  [ "$status" -eq 126 ]
  [ "$(grep -c "program '$BATS_TEST_TMPDIR/plain.sh' is not executable" <<<"$stderr")" -eq 2 ]
}

@test "exec: without '--' or without a program is a usage error (exit 2); --help shows the exit codes" {
  run --separate-stderr "$ST" exec true
  [ "$status" -eq 2 ]
  [[ $stderr == *"exec: the program must follow '--': slurm-train exec [OPTIONS] -- PROGRAM [ARGS...]"* ]]
  run --separate-stderr "$ST" exec --
  [ "$status" -eq 2 ]
  [[ $stderr == *"exec: no program after '--'"* ]]
  run --separate-stderr "$ST" exec --hang-timeout=-1 -- true
  [ "$status" -eq 2 ]
  run --separate-stderr "$ST" exec --straggler-threshold 1 -- true
  [ "$status" -eq 2 ]
  [[ $stderr == *"1: expected a factor above 1"* ]]
  run "$ST" exec --help
  [ "$status" -eq 0 ]
  [[ $output == *"4    hang:"* ]]
  [[ $output == *"5    preempted:"* ]]
  [[ $output == *"127: it was not found"* ]]
  [[ $output == *'f.write(f"{step} {compute_seconds}")'* ]]
}

# oom_cgroup: a new memory cgroup below this process's, limited to 512 MiB (printed), or fails.
oom_cgroup() {
  local line path dir
  if line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup); then
    path=${line##*:}
    dir=/sys/fs/cgroup/memory${path%/}/slurm-train-oom-$$
    mkdir "$dir" 2>/dev/null && echo $((512 << 20)) >"$dir/memory.limit_in_bytes" || return 1
    echo $((512 << 20)) >"$dir/memory.memsw.limit_in_bytes" 2>/dev/null || true
  else
    path=$(sed -n 's/^0:://p' /proc/self/cgroup)
    dir=/sys/fs/cgroup${path%/}/slurm-train-oom-$$
    mkdir "$dir" 2>/dev/null && echo $((512 << 20)) >"$dir/memory.max" || return 1
    echo 0 >"$dir/memory.swap.max" 2>/dev/null || true
  fi
  echo "$dir"
}

# 512 MiB: the supervisor itself holds about 170 MiB (cuBLASLt's static data is touched when the
# library loads), and the OOM killer takes the largest process of the cgroup: the program must
# outgrow it before the limit is reached.
@test "exec: a program the out-of-memory killer ends is named as such (its memory cgroup's oom_kill count)" {
  cg=$(oom_cgroup) || skip "cannot make a memory cgroup with a limit here (cgroup v1 or v2 memory controller, root)"
  run --separate-stderr sh -c "echo \$\$ >'$cg/cgroup.procs' && exec '$ST' exec --log-dir= -- $PY -c 'print(\"allocating\", flush=True); x = bytearray(1536 << 20)'"
  echo "$stderr"
  rmdir "$cg" 2>/dev/null || true
  [ "$status" -eq 137 ]
  [[ $stderr == *"its program python3 (pid "*") was killed by the out-of-memory killer (SIGKILL; its memory cgroup's oom_kill count went from "*"last lines of its output:"*"  | allocating"* ]]
}

@test "exec: a program's exit status is forwarded; alone (outside Slurm) it runs as rank 0 of 1" {
  run --separate-stderr env -u SLURM_JOB_ID "$ST" exec --log-dir= -- sh -c 'echo "$RANK/$WORLD_SIZE $MASTER_ADDR"; exit 3'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 3 ]
  [ "$output" = "0/1 127.0.0.1" ]
  [[ $stderr == *"ending the job: rank 0 on "*" failed: its program sh (pid "*") exited with status 3"*"last lines of its output:"*"  | 0/1 127.0.0.1"* ]]
}
