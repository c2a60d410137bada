#!/usr/bin/env bats
# slurm-train run as a launcher on a two-node local cluster: a rank killed under srun and under
# mpirun ends the job within 30 s naming it; an injected hang is named by the watchdog; a job
# signalled by Slurm before its time limit checkpoints, requeues itself, resumes and ends with
# the parameters of an uninterrupted run; per-rank logs; the restart limit; --dry-run; a
# diverged loss (exit 9); one job per checkpoint folder (exit 8); metrics per job; a quiet start.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

# pid_of_rank LOGDIR RANK [TEXT]: the pid a rank wrote in the first line of its log, once the log
# holds TEXT (default: a step's line).
pid_of_rank() {
  local log deadline=$((SECONDS + 30))
  while :; do
    log=$(ls "$1"/*/rank-"$2".log 2>/dev/null | head -1)
    if [ -n "$log" ] && grep -q -- "${3:- step }" "$log"; then
      sed -n 's/.*, pid \([0-9]*\),.*/\1/p' "$log" | tail -1
      return 0
    fi
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# kill_rank_and_time LOGDIR RANK PID_OF_LAUNCHER: SIGKILLs the rank once it trains, then waits
# for the launcher; prints the seconds it took to end.
kill_rank_and_time() {
  local pid
  pid=$(pid_of_rank "$1" "$2") || { echo "rank $2 never started training"; return 1; }
  local t0=$SECONDS
  kill -KILL "$pid"
  wait "$3" || true
  echo $((SECONDS - t0))
}

@test "a rank SIGKILLed under srun ends the whole job within 30 s, naming the rank" {
  set_small_args
  logs=$BATS_TEST_TMPDIR/logs
  # Rank 0 hangs in its forward pass, outside MPI, before rank 1 is killed: in an all-reduce Open
  # MPI could see rank 1 go at the same moment as the watchdog and abort rank 0 first, unnamed.
  srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 --train.log_every 10 \
    --inject-fault hang@20:0 --log-dir "$logs" >"$BATS_TEST_TMPDIR/out" 2>&1 &
  launcher=$!
  pid_of_rank "$logs" 0 "rank 0 hangs at step 20" >/dev/null
  took=$(kill_rank_and_time "$logs" 1 $launcher)
  wait $launcher && status=0 || status=$?
  cat "$BATS_TEST_TMPDIR/out"
  echo "ended ${took} s after the kill, exit $status"
  [ "$took" -le 30 ]
  [ "$status" -ne 0 ]
  grep -q "slurm-train: error: rank 1 (host node2, pid [0-9]*) is gone" "$BATS_TEST_TMPDIR/out"
  [ -z "$(squeue -h -s)" ]
}

@test "a rank SIGKILLed under mpirun ends the whole job within 30 s, naming the rank" {
  set_small_args
  logs=$BATS_TEST_TMPDIR/logs
  mpirun -n 3 --oversubscribe "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 --train.log_every 10 \
    --inject-fault slow@20 --log-dir "$logs" >"$BATS_TEST_TMPDIR/out" 2>&1 &
  launcher=$!
  took=$(kill_rank_and_time "$logs" 2 $launcher)
  wait $launcher && status=0 || status=$?
  cat "$BATS_TEST_TMPDIR/out"
  echo "ended ${took} s after the kill, exit $status"
  [ "$took" -le 30 ]
  [ "$status" -ne 0 ]
  # Our watchdog's message, or mpirun's own when it was quicker to end the other ranks.
  grep -q -e "rank 2 (host [^,]*, pid [0-9]*) is gone" -e "process rank 2 .* exited on signal 9" "$BATS_TEST_TMPDIR/out"
}

@test "rank 0 crashing (--inject-fault crash) ends every other rank under srun" {
  set_small_args
  start=$SECONDS
  run timeout 60 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 \
    --inject-fault crash@30:0
  echo "$output"
  [ $((SECONDS - start)) -le 40 ]
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  [[ $output == *"--inject-fault: rank 0 kills itself (SIGKILL) at step 30"* ]]
  # Rank 1 may be waiting in the gradient all-reduce when rank 0 dies: then Open MPI sees the
  # closed connection at the same moment as our watchdog and may end the process first (it
  # aborts, it does not return an error). Either way rank 1 ends and says why.
  [[ $output == *"rank 0 is gone: its watchdog connection"* ||
     $output == *"An MPI communication peer process has unexpectedly disconnected"* ]]
}

@test "rank 0 crashing while rank 1 is busy outside MPI: rank 1's watchdog names rank 0 and ends it" {
  set_small_args
  start=$SECONDS
  # Rank 1 hangs in its forward pass, where MPI makes no progress and cannot notice rank 0's end.
  # Rank 0 is 100 ms slower a step (before its forward pass), so that rank 1 is surely in its hang
  # when rank 0 dies in the same step: without it, a rank 1 held back on a busy machine could be
  # ended before it got there.
  logs=$BATS_TEST_TMPDIR/logs
  run timeout 60 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 \
    --inject-fault slow@100:0,crash@30:0,hang@30:1 --log-dir "$logs"
  echo "$output"
  [ $((SECONDS - start)) -le 40 ]
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  grep -q -- "--inject-fault: rank 1 hangs at step 30" "$logs"/*/rank-1.log
  # From its log: srun, ending the step as task 0 dies, may drop rank 1's last line on stderr.
  grep -q "rank 0 is gone: its watchdog connection (.*) closed without a word.*; ending rank 1" "$logs"/*/rank-1.log
}

@test "an injected hang: the watchdog names the stuck rank and its phase, and the job ends with exit 4" {
  set_small_args
  run timeout 90 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 \
    --inject-fault hang@40:1 --hang-timeout 4
  echo "$output"
  [ "$status" -eq 4 ]
  [[ $output == *"rank status (gathered by the watchdog, not through MPI)"* ]]
  [[ $output =~ \ 1\ +node2\ +[0-9]+\ +running\ +40\ +forward ]]
  [[ $output =~ \ 0\ +node1\ +[0-9]+\ +running\ +40\ +gradient\ all-reduce ]]
  [[ $output == *"hang: rank 1 (node2, pid "*") made no progress for 4 s in the forward phase of step 40; rank(s) 0 wait for it"* ]]
}

@test "examples/preemptible.sbatch (--signal=USR2@N --requeue): checkpoint, requeue, resume, and the parameters of an uninterrupted run" {
  set_small_args
  work=$BATS_TEST_TMPDIR/preempt
  mkdir -p "$work/data"
  ln -s "$TEST_DATA" "$work/data/fashion-mnist"
  ln -s "$ROOT/examples" "$work/examples"
  TUNE=(--model.hidden "[64,32]" --train.metrics "" --train.eval_batch 2000 --train.global_batch 250
    --train.steps 600 --train.log_every 100)
  # The uninterrupted run of the same configuration, on the same two ranks of one node.
  (cd "$work" && srun --mpi=pmix -N1 -n2 "$BUILD/bin/slurm-train" run --config examples/fashion-mnist.toml "${TUNE[@]}" \
    --train.save "$work/uninterrupted.h5" >/dev/null)
  # Slurm sends the --signal warning once now + N + 30 s reaches the time limit (its time-limit
  # check runs every 30 s), so between N + 30 and N seconds before the limit; with N + 30 at or
  # above the limit it comes at once, in every run. With two minutes and N = 60: between 30 and 60
  # s into each run. The slow steps make the training need about 65 s, so the first run is always
  # signalled mid-training; a later run may be signalled again, and resumes the same way.
  job=$(cd "$work" && PATH="$BUILD/bin:$PATH" sbatch --parsable --time=2 --signal=USR2@60 examples/preemptible.sbatch \
    "${TUNE[@]}" --train.save "$work/preempted.h5" --log-dir "$work/logs" --inject-fault slow@105)
  run wait_job "$job" 400
  out=$(cat "$work/preemptible-$job.out")
  echo "$out"
  [ "$output" = COMPLETED ]
  ckpt=$work/checkpoints/preemptible-$job
  [[ $out == *"preempted (SIGUSR2 on "?" of 2 rank(s)): stopped after step "*", checkpoint checkpoints/preemptible-$job/step-"*".h5 written"* ]]
  [[ $out == *"requeued job $job: it resumes from step"*"(exit 5)"* ]]
  [[ $out == *"job $job starts on "*"(restart 1)"* ]]
  [[ $out == *"resumed from checkpoints/preemptible-$job/step-"* ]]
  [[ $out == *"final: test_acc"* ]]
  restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
  [ "$restarts" -ge 1 ]
  run $PY "$ROOT/test/integration/compare_models.py" "$work/preempted.h5" "$work/uninterrupted.h5" 0
  echo "$output"
  [ "$status" -eq 0 ]
  # Every rank's log holds every run, appended, each line with the time and the rank.
  for r in 0 1; do
    log=$work/logs/$job/rank-$r.log
    [ "$(grep -c "rank $r: slurm-train .* rank $r of 2" "$log")" -ge 2 ]
    grep -q "^20[0-9-]*T[0-9:.]*Z rank $r: preempted (SIGUSR2" "$log"
    grep -q "rank $r: done (exit 0)" "$log"
  done
  grep -q '^restarts_without_progress = 0$' "$ckpt/restarts"
  grep -q '^last_step_reached = 600$' "$ckpt/restarts"
}

@test "SIGTERM outside Slurm: checkpoint at the next step, exit 6 (preempted, not requeued); --no-resume starts fresh" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  env -u SLURM_JOB_ID "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 3000 --ckpt.dir "$ckpt" \
    --inject-fault slow@10 >"$BATS_TEST_TMPDIR/out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q '^start-up:' "$BATS_TEST_TMPDIR/out" && break; sleep 0.1; done
  sleep 0.5
  kill -TERM $pid
  wait $pid && status=0 || status=$?
  cat "$BATS_TEST_TMPDIR/out"
  [ "$status" -eq 6 ]
  grep -q "preempted (SIGTERM on 1 of 1 rank(s)): not requeued: not inside a Slurm job" "$BATS_TEST_TMPDIR/out"
  ls "$ckpt"/step-*.h5
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 3000 --ckpt.dir "$ckpt" --no-resume --train.stop_after 5
  [ "$status" -eq 0 ]
  [[ $output != *"resumed from"* ]]
  [[ $output == *"stopping after step 5 of 3000"* ]]
}

@test "a stop signal that comes with the last step ends the run as planned: exit 0, the final line, nothing to resume" {
  set_small_args
  d=$BATS_TEST_TMPDIR
  # 3 s in each step's data phase: the signal lands in the last step, once two steps are written.
  env -u SLURM_JOB_ID "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 3 --ckpt.dir "$d/ck" \
    --train.metrics "$d/m.jsonl" --inject-fault slow@3000 >"$d/out" 2>&1 &
  pid=$!
  for _ in $(seq 300); do [ "$(grep -c '"loss"' "$d/m.jsonl" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
  [ "$(grep -c '"loss"' "$d/m.jsonl")" = 2 ]
  kill -TERM $pid
  wait $pid && status=0 || status=$?
  cat "$d/out"
  [ "$status" -eq 0 ]
  grep -q "SIGTERM on 1 of 1 rank(s) came with the last step: the training is complete and ends as planned" "$d/out"
  grep -q "^final: test_acc" "$d/out"
  run grep -c "preempted\|stopping after" "$d/out"
  [ "$output" = 0 ]
  [ "$(grep -c '"loss"' "$d/m.jsonl")" = 3 ]
}

@test "after --max-restarts-without-progress starts from the same step the job gives up with exit 7" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 100 --ckpt.dir "$ckpt" --train.stop_after 20
  [ "$status" -eq 0 ]
  # Runs that die before their next checkpoint (as on a failing node) start from step 20 again.
  for i in 1 2; do
    run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 100 --ckpt.dir "$ckpt" --inject-fault crash@25:0 \
      --max-restarts-without-progress 1
    [ "$status" -eq 137 ]
  done
  grep -q '^restarts_without_progress = 1$' "$ckpt/restarts"
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 100 --ckpt.dir "$ckpt" --max-restarts-without-progress 1
  echo "$output"
  [ "$status" -eq 7 ]
  [[ $output == *"started 2 times in a row from step 20 without getting further (more than --max-restarts-without-progress=1)"* ]]
  grep -q '^restarts_without_progress = 2$' "$ckpt/restarts"
  # Without the limit it trains on.
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 100 --ckpt.dir "$ckpt" --max-restarts-without-progress 0
  [ "$status" -eq 0 ]
}

@test "--dry-run fails with a clear message for a bad key, a bad value and a missing dataset" {
  set_small_args
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run --train.lrr 0.1
  [ "$status" -eq 2 ]
  [[ $output == *"unknown option '--train.lrr' (did you mean '--train.lr'?)"* ]]
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run --train.global_batch -3
  [ "$status" -eq 2 ]
  [[ $output == *"train.global_batch = -3"* ]]
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run --data.train "$BATS_TEST_TMPDIR/none.h5"
  [ "$status" -eq 2 ]
  [[ $output == *"FAIL  train data   cannot open HDF5 file '$BATS_TEST_TMPDIR/none.h5'"* ]]
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run --inject-fault hang@x
  [ "$status" -eq 2 ]
  [[ $output == *"--inject-fault 'hang@x': cannot read 'hang@x'"* ]]
}

@test "run --help documents the exit codes and the launcher's options" {
  run "$BUILD/bin/slurm-train" run --help
  [ "$status" -eq 0 ]
  [[ $output == *"--hang-timeout"* ]]
  [[ $output == *"--preempt-signal"*"USR2,TERM"* ]]
  [[ $output == *"--max-restarts-without-progress"* ]]
  [[ $output == *"5  preempted: checkpoint written and the job requeued itself (scontrol requeue)"* ]]
  [[ $output == *"7  do not requeue"* ]]
  [[ $output == *"8  ckpt.dir belongs to another running job"* ]]
  [[ $output == *"9  training diverged"* ]]
  [[ $output == *"nan@STEP:RANK"* ]]
}

@test "a NaN loss on one rank stops every rank at that step with exit 9, before any checkpoint of it" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  run timeout 120 srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 100 \
    --ckpt.dir "$ckpt" --ckpt.every 1 --ckpt.keep 0 --inject-fault nan@7:1
  echo "$output"
  [ "$status" -eq 9 ]
  [[ $output == *"slurm-train: error: training diverged at step 7: the loss is nan (gradient norm "*"); stopped before the optimizer update, and no checkpoint of it was written"*"try a lower train.lr"*"(exit 9)"* ]]
  # The checkpoints of steps 1..7 (the state before step 7 ran), none after; all valid.
  [ "$(ls "$ckpt" | grep -c '^step-.*\.h5$')" -eq 7 ]
  [ -f "$ckpt/step-00000007.h5" ]
  [ ! -e "$ckpt/step-00000008.h5" ]
  run "$BUILD/bin/slurm-train" ckpt verify "$ckpt"
  [ "$status" -eq 0 ]
}

@test "a diverging learning rate (sgd, train.lr 10, no clipping) stops with exit 9; every committed checkpoint is finite and verifies" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 50 --ckpt.dir "$ckpt" --ckpt.every 1 \
    --train.optimizer sgd --train.schedule constant --train.lr 10 --train.weight_decay 0 --train.clip_norm 0
  echo "$output"
  [ "$status" -eq 9 ]
  [[ $output == *"training diverged"* ]]
  run "$BUILD/bin/slurm-train" ckpt verify "$ckpt"
  echo "$output"
  [ "$status" -eq 0 ]
  # What is there reads back finite.
  for f in "$ckpt"/step-*.h5; do
    $PY -c 'import h5py, numpy, sys
f = h5py.File(sys.argv[1], "r")
bad = []
f.visititems(lambda n, d: bad.append(n) if isinstance(d, h5py.Dataset) and d.dtype.kind == "f" and not numpy.isfinite(d[()]).all() else None)
sys.exit(1 if bad else 0)' "$f"
  done
}

@test "a CPU-only run says in one line that there is no GPU" {
  set_small_args
  run --separate-stderr "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --train.device auto
  [ "$status" -eq 0 ]
  echo "$stderr"
  [[ $stderr == *"slurm-train: no GPU on this node: training on the CPU"* ]]
  # One line: nothing else on stderr speaks of the GPU, CUDA or its errors.
  [ "$(grep -ciE 'gpu|cuda|nvidia' <<<"$stderr")" -eq 1 ]
}

@test "srun of two tasks without an MPI plugin: one line saying to add --mpi=pmix, exit 2" {
  set_small_args
  run timeout 60 srun --mpi=none -N1 -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c 'srun started 2 tasks without an MPI plugin: add --mpi=pmix (or set MpiDefault=pmix)' <<<"$output")" -eq 1 ]
  [ "$(grep -vcE -e 'srun started 2 tasks' -e '^srun: error: node1: tasks? [0-9,-]+: Exited with exit code 2$' <<<"$output")" -eq 0 ]
}

@test "resuming a finished run retrains nothing, says it is complete, and leaves the model file alone" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  model=$BATS_TEST_TMPDIR/model.h5
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 20 --ckpt.dir "$ckpt" --train.save "$model"
  [ "$status" -eq 0 ]
  before=$(stat -c '%Y.%y %s' "$model"; md5sum <"$model"; ls "$ckpt")
  sleep 1.1
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 20 --ckpt.dir "$ckpt" --train.save "$model"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"step-00000020.h5 is at step 20 of 20: this run is already complete; nothing to train, $model left as it is"* ]]
  [[ $output != *"saved the model"* ]]
  [[ $output != *"training "*" parameters"* ]]
  [ "$(stat -c '%Y.%y %s' "$model"; md5sum <"$model"; ls "$ckpt")" = "$before" ]
  # Stopped after its last checkpoint but before the model was written: the model is written.
  mv "$model" "$model.first"
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 20 --ckpt.dir "$ckpt" --train.save "$model"
  [ "$status" -eq 0 ]
  [[ $output == *"this run is already complete; nothing to train (--no-resume trains again)"*"saved the model to $model"* ]]
  $PY "$ROOT/test/integration/compare_models.py" "$model" "$model.first" 0
}

# folder_snapshot DIR: every file's name, inode, size, mtime and checksum.
folder_snapshot() {
  (cd "$1" && for f in $(ls -A); do echo "$f $(stat -c '%i %s %.9Y' "$f") $(md5sum <"$f")"; done)
}

@test "two runs on one ckpt.dir: the second is refused (exit 8) naming the owner, 10 trials each with and without HDF5_USE_FILE_LOCKING=FALSE; nothing of the first is touched" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  # The first run checkpoints steps 10, 20, 30, then rank 0 hangs (watchdog off) and keeps the folder.
  srun --mpi=pmix -N1 -n1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 1000 --ckpt.dir "$ckpt" \
    --ckpt.every 10 --inject-fault hang@30:0 --hang-timeout 0 >"$BATS_TEST_TMPDIR/first" 2>&1 &
  first=$!
  for _ in $(seq 600); do grep -q 'checkpoint step 30 ->' "$BATS_TEST_TMPDIR/first" && [ -z "$(ls "$ckpt" | grep tmp)" ] && break; sleep 0.1; done
  grep -q 'hangs at step 30' "$BATS_TEST_TMPDIR/first"
  sleep 0.5
  first_job=$(sed -n 's/^job \([0-9_]*\): .*/\1/p' "$BATS_TEST_TMPDIR/first")
  [ -n "$first_job" ]
  before=$(folder_snapshot "$ckpt")
  echo "$before"
  for locking in default FALSE; do
    for trial in $(seq 10); do
      if [ $locking = FALSE ]; then export HDF5_USE_FILE_LOCKING=FALSE; else unset HDF5_USE_FILE_LOCKING; fi
      run timeout 60 srun --mpi=pmix -N1 -n1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 1000 --ckpt.dir "$ckpt" --ckpt.every 10
      [ "$status" -eq 8 ] || { echo "trial $trial ($locking): exit $status: $output"; false; }
      [[ $output == *"slurm-train: error: the checkpoint folder '$ckpt' belongs to job $first_job (step 0, host "*", pid "*"), which is still running"*"(exit 8)"* ]]
      [[ $output != *"training "* ]]
      [ "$(folder_snapshot "$ckpt")" = "$before" ]
    done
  done
  unset HDF5_USE_FILE_LOCKING
  kill -KILL $first
  wait $first || true
  scancel "$first_job" 2>/dev/null || true
  run "$BUILD/bin/slurm-train" ckpt verify "$ckpt"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "^job = $first_job\$" "$ckpt/owner"  # left behind by the killed run
}

@test "an owner record left by a killed run (its job ended) is taken over, said so, and the run resumes" {
  set_small_args
  ckpt=$BATS_TEST_TMPDIR/ckpt
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 40 --ckpt.dir "$ckpt" --train.stop_after 20
  [ "$status" -eq 0 ]
  [ ! -e "$ckpt/owner" ]  # released at the end of the run
  # As a run killed on another node leaves it: a job Slurm no longer knows, and its partial file.
  printf 'job = 999999\nstep = 0\nhost = node-elsewhere\npid = 4242\nstarted = 1796169462\n' >"$ckpt/owner"
  touch "$ckpt/step-00000030.h5.tmp-node-elsewhere-4242"
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 40 --ckpt.dir "$ckpt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"taking over the checkpoint folder '$ckpt' from job 999999 (step 0, host node-elsewhere, pid 4242, since 2026-12-01T23:57:42Z): Slurm says job 999999 has ended"* ]]
  [[ $output == *"resumed from $ckpt/step-00000020.h5"* ]]
  [ ! -e "$ckpt/owner" ]
  [ -z "$(ls "$ckpt" | grep tmp)" ]
}

@test "metrics of separate runs go to separate files ({job}), each line naming its run; a requeued job appends to its own" {
  set_small_args
  cd "$BATS_TEST_TMPDIR"
  ckpt=$BATS_TEST_TMPDIR/ckpt
  # The same job started twice (a requeue keeps Slurm's job id): one file, one run.
  for stop in 10 20; do
    run env SLURM_JOB_ID=4242 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.metrics 'metrics-{job}.jsonl' \
      --train.steps 20 --train.stop_after "$stop" --ckpt.dir "$ckpt"
    [ "$status" -eq 0 ]
  done
  [ "$(grep -c '"loss":' metrics-4242.jsonl)" -eq 20 ]
  [ "$(grep -c '"run":"4242"' metrics-4242.jsonl)" -eq "$(wc -l <metrics-4242.jsonl)" ]
  # Another job: its own file, nothing appended to the first.
  run env SLURM_JOB_ID=4243 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.metrics 'metrics-{job}.jsonl' --train.steps 5
  [ "$status" -eq 0 ]
  [ "$(grep -c '"loss":' metrics-4242.jsonl)" -eq 20 ]
  [ "$(grep -c '"run":"4243"' metrics-4243.jsonl)" -eq "$(wc -l <metrics-4243.jsonl)" ]
  [ "$(grep -c '"loss":' metrics-4243.jsonl)" -eq 5 ]
  # The reference configuration names one file per job.
  grep -q '^metrics = "metrics-{job}.jsonl"' "$ROOT/examples/fashion-mnist.toml"
  run "$BUILD/bin/slurm-train" plot metrics-4242.jsonl metrics-4243.jsonl -o curves.png
  [ "$status" -eq 0 ]
}
