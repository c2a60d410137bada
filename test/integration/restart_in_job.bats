#!/usr/bin/env bats
# make test: alone
# Restarts inside the job (`slurm-train srun`) on a three-node cluster: two nodes train, one is a
# spare. A rank killed, a hang, a whole node killed: the same job finishes on the spare with the
# parameters of an uninterrupted two-rank run, bit for bit. A run that diverges at the same step
# every time ends after its second failure; a configuration error is not restarted. Stragglers
# are named (and, asked, left out at the next restart), under exec too from the heartbeat's
# compute seconds (clean runs naming none is straggler_false_alarms.bats). Alone in make test (the
# marker above): its recoveries are timed, and beside two loaded lanes its jobs ran out of time.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 3
  set_small_args
  # The uninterrupted run every restarted one must equal.
  srun --mpi=pmix -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 300 \
    --train.save "$BATS_FILE_TMPDIR/straight.h5" >/dev/null
}

teardown_file() {
  stop_test_cluster
}

setup() {
  d=$BATS_TEST_TMPDIR
}

# submit_restarting NAME [RUN ARGS...]: a batch job of three nodes whose script runs the small
# configuration for 300 steps (checkpoints every 50) under `slurm-train srun --spare-nodes 1`
# (and the options in the array SUPERVISOR, when set); prints the job id. Its output is
# $d/NAME.out, its record under $d/logs, its model $d/NAME.h5.
submit_restarting() {
  local name=$1
  shift
  set_small_args
  {
    echo '#!/bin/bash'
    echo "#SBATCH --nodes=3 --no-kill --ntasks-per-node=1 --output=$d/$name.out"
    printf '%q ' "$BUILD/bin/slurm-train" srun --spare-nodes 1 --restarts 3 --log-dir "$d/logs" "${SUPERVISOR[@]}" \
      -- --mpi=pmix \
      --ntasks-per-node=1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 300 --ckpt.dir "$d/ck" \
      --ckpt.every 50 --train.save "$d/$name.h5" "$@"
    echo
  } >"$d/$name.sh"
  sbatch --parsable "$d/$name.sh"
}

# The restart's lines: the node left out, the restart on the spare, the recovery time (at most
# 10 s), and the model equal to the uninterrupted run's.
check_recovered() {
  local name=$1 node=$2 nodes=${3:-node1,node3} out=$d/$1.out
  cat "$out"
  grep -q "slurm-train srun: leaving $node out of the job" "$out"
  grep -q "slurm-train srun: restart 1 of 3 on $nodes:" "$out"
  grep -Eq "^  rank +1  host ${nodes#*,} " "$out"
  grep -q "slurm-train srun: training finished; 1 restart(s) inside the job; nodes left out: $node" "$out"
  [[ $(cat "$out") =~ the\ new\ step\'s\ first\ training\ step\ came\ ([0-9.]+)\ s\ after\ the\ failure ]]
  echo "recovery: ${BASH_REMATCH[1]} s"
  awk -v s="${BASH_REMATCH[1]}" 'BEGIN { exit !(s <= 10) }'
  h5diff "$BATS_FILE_TMPDIR/straight.h5" "$d/$name.h5" /model /model
}

@test "a rank SIGKILLed at step 100 of 300: the same job restarts on the spare and ends with the uninterrupted run's parameters" {
  # slow@10: 50 steps take at least 0.5 s, so that the checkpoint of step 50 is on disk before
  # the crash on a fast machine too (a background write in flight dies with the step).
  job=$(submit_restarting killed --inject-fault crash@100:1,slow@10)
  run wait_job "$job" 300
  [ "$output" = COMPLETED ]
  check_recovered killed node2
  grep -q "rank 1 (host node2, pid [0-9]*) is gone" "$d/killed.out"
  grep -q -- "--inject-fault=crash@100:1,slow@10: not injected in restart 1 of the job" "$d/killed.out"
  # The record keeps both attempts: the failure (node, rank, cause, step reached, steps lost) and the recovery.
  run $PY -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
assert len(a) == 2, a
f, r = a
assert (f["cause"], f["node"], f["rank"], f["left_out"]) == ("rank-lost", "node2", 1, ["node2"]), f
assert f["step_reached"] >= 100 and r["started_from"] in (50, 100), (f, r)
assert f["steps_lost"] == f["step_reached"] - r["started_from"] and 0 <= f["steps_lost"] <= 50, (f, r)
assert (r["cause"], r["nodes"], r["step_reached"]) == ("done", ["node1", "node3"], 300), r
assert 0 < r["recovery_seconds"] <= 10, r
' "$d/logs/$job/restarts.jsonl"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "a rank killed while rank 0 writes a checkpoint: rank 0 finishes the write first, the restart resumes from it" {
  # slow-ckpt@4: the write of step 50 takes about a second, so the crash at 55 comes while it is in flight.
  job=$(submit_restarting in-flight --inject-fault crash@55:1,slow-ckpt@4 --log-dir "$d/logs")
  run wait_job "$job" 300
  [ "$output" = COMPLETED ]
  check_recovered in-flight node2
  grep -q "resumed from $d/ck/step-00000050.h5 at step 50" "$d/in-flight.out"
  grep -q "rank 0: waited [0-9.]* s for the checkpoint write in flight, which finished" "$d/logs/$job/rank-0.log"
}

@test "a requeued job keeps the nodes its restarts left out, and its log names them" {
  job=$(submit_restarting requeued --inject-fault crash@100:1,slow@10)
  run wait_job "$job" 300
  [ "$output" = COMPLETED ]
  grep -q "slurm-train srun: leaving node2 out of the job" "$d/requeued.out"
  # As preemption does: the same job id, its script again (its output file anew).
  scontrol requeue "$job"
  for _ in $(seq 100); do [[ $(scontrol show job "$job" | grep -o 'JobState=[A-Z]*') = JobState=COMPLETED ]] || break; sleep 0.2; done
  run wait_job "$job" 300
  cat "$d/requeued.out"
  [ "$output" = COMPLETED ]
  grep -q "slurm-train srun: nodes left out by earlier attempts of job $job: node2" "$d/requeued.out"
  grep -q "slurm-train srun: step on node1,node3:" "$d/requeued.out"
  ! grep -q "step on node1,node2" "$d/requeued.out"
}

@test "rank 0 SIGKILLed: no verdict from it, srun's word names its node, which is left out; the same final bits" {
  job=$(submit_restarting rank0-killed --inject-fault crash@100:0,slow@10)
  run wait_job "$job" 300
  [ "$output" = COMPLETED ]
  check_recovered rank0-killed node1 node2,node3
  grep -q "slurm-train srun: step ended after .*: rank-lost (exit [0-9]*) on node1" "$d/rank0-killed.out"
}

@test "a hang: named with its node, the step ended and restarted on the spare, the same final bits" {
  job=$(submit_restarting hung --inject-fault hang@100:1 --hang-timeout 3)
  run wait_job "$job" 300
  [ "$output" = COMPLETED ]
  check_recovered hung node2
  grep -q "hang: rank 1 (node2, pid [0-9]*) made no progress" "$d/hung.out"
}

@test "a run that diverges at the same step every time ends after its second failure, not after --restarts" {
  job=$(submit_restarting diverging --train.lr 10 --train.clip_norm 0 --train.optimizer sgd --train.momentum 0.99)
  run wait_job "$job" 300
  [ "$output" = FAILED ]
  cat "$d/diverging.out"
  [ "$(grep -c 'training diverged at step' "$d/diverging.out")" -eq 2 ]
  grep -q "slurm-train srun: the same failure (diverged) at the same step ([0-9]*) twice in a row: not restarting again; 1 restart(s) inside the job" "$d/diverging.out"
  ! grep -q "leaving .* out of the job" "$d/diverging.out"
  scontrol show job "$job" | grep -q 'ExitCode=9:0'
}

@test "a configuration error is not restarted" {
  job=$(submit_restarting bad --train.steps=-5)
  run wait_job "$job" 300
  [ "$output" = FAILED ]
  cat "$d/bad.out"
  grep -q "train.steps" "$d/bad.out"
  grep -q "slurm-train srun: a configuration error is not restarted; 0 restart(s) inside the job" "$d/bad.out"
  [ "$(grep -c 'slurm-train srun: step on\|slurm-train srun: restart' "$d/bad.out")" -eq 1 ]
  scontrol show job "$job" | grep -q 'ExitCode=2:0'
}

@test "slurm-train srun refuses srun options that choose the nodes, and runs only inside an allocation" {
  run env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$BUILD/bin/slurm-train" srun -- hostname
  [ "$status" -eq 2 ]
  [[ $output == *"not inside a Slurm allocation"* ]]
  run env SLURM_JOB_ID=1 SLURM_JOB_NODELIST="node[1-3]" "$BUILD/bin/slurm-train" srun -- --nodes=2 hostname
  [ "$status" -eq 2 ]
  [[ $output == *"srun option '--nodes=2': the supervisor chooses the step's nodes"* ]]
  run env SLURM_JOB_ID=1 SLURM_JOB_NODELIST="node[1-3]" "$BUILD/bin/slurm-train" srun --spare-nodes 3 -- hostname
  [ "$status" -eq 2 ]
  [[ $output == *"--spare-nodes=3 leaves no node of the job's 3 to train on"* ]]
  run "$BUILD/bin/slurm-train" srun hostname
  [ "$status" -eq 2 ]
  [[ $output == *"srun's arguments must follow '--'"* ]]
}

@test "examples/spare-nodes.sbatch, as written: a rank killed, the job ends on the spare after one restart" {
  set_small_args
  ln -s "$ROOT/examples" "$d/examples"
  # Its own log folder: a test cluster started again gives out the same job ids, and a record of
  # an earlier job with this id would leave its nodes out.
  job=$(PATH=$BUILD/bin:$PATH SLURM_TRAIN_LOG_DIR=$d/logs sbatch --parsable --chdir "$d" "$ROOT/examples/spare-nodes.sbatch" "${SMALL[@]:2}" \
    --train.steps 300 --ckpt.every 50 --inject-fault crash@100:1,slow@10)
  run wait_job "$job" 300
  cat "$d/fashion-mnist-spare-$job.out"
  [ "$output" = COMPLETED ]
  grep -q "slurm-train srun: training finished; 1 restart(s) inside the job; nodes left out: node2" \
    "$d/fashion-mnist-spare-$job.out"
  [ -f "$d/checkpoints/spare-$job/step-00000300.h5" ]
}

@test "exec: the PyTorch DDP example, a rank SIGKILLed at step 150: restarted on the spare, it resumes from its own checkpoint and ends with the uninterrupted run's loss" {
  $PY -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
  DDP=$ROOT/examples/pytorch_ddp.py
  ARGS=(--steps 300 --log-every 50)
  srun -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" exec --log-dir= -- $PY "$DDP" "${ARGS[@]}" >"$d/straight.out" 2>&1
  expected=$(grep '^final loss' "$d/straight.out")
  [ -n "$expected" ]
  {
    echo '#!/bin/bash'
    echo "#SBATCH --nodes=3 --no-kill --ntasks-per-node=1 --output=$d/ddp.out"
    printf '%q ' "$BUILD/bin/slurm-train" srun --spare-nodes 1 --log-dir "$d/logs" -- "$BUILD/bin/slurm-train" exec \
      --log-dir "$d/logs" -- $PY "$DDP" "${ARGS[@]}" --ckpt "$d/ddp.pt" --ckpt-every 100 --kill-at-step 150 --kill-rank 1
    echo
  } >"$d/ddp.sh"
  job=$(sbatch --parsable "$d/ddp.sh")
  run wait_job "$job" 300
  cat "$d/ddp.out"
  [ "$output" = COMPLETED ]
  grep -q "rank 1 kills itself at step 150" "$d/ddp.out" || grep -q "rank 1 kills itself at step 150" "$d/logs/$job/rank-1.log"
  grep -q "slurm-train srun: leaving node2 out of the job: rank-lost there" "$d/ddp.out"
  grep -q "slurm-train srun: restart 1 of 3 on node1,node3:" "$d/ddp.out"
  grep -q "restart 1 inside the job (rank-lost of rank 1 on node2): resuming from $d/ddp.pt" "$d/ddp.out"
  grep -q "resumed from $d/ddp.pt at step 100" "$d/ddp.out"
  [ "$(grep '^final loss' "$d/ddp.out")" = "$expected" ]
}

@test "a straggler (slow@200:1 on 2 ranks) is named within its first windows, in the log, the metrics and the Prometheus file" {
  set_small_args
  run srun --mpi=pmix -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 60 \
    --train.metrics "$d/m.jsonl" --train.prometheus "$d/p.prom" --train.prometheus_every 5 --inject-fault slow@200:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ straggler:\ rank\ 1\ \((node[0-9]),\ pid\ [0-9]+,\ cpu\)\ computes\ ([0-9.]+)x\ the\ ranks\'\ median ]]
  host=${BASH_REMATCH[1]}
  # Named once, within its first three windows of 2 s (each step is 200 ms longer: 10 steps a window).
  [ "$(grep -c 'straggler: rank' <<<"$output")" -eq 1 ]
  run $PY -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
s = [l["straggler"] for l in lines if "straggler" in l]
assert len(s) == 1 and s[0]["rank"] == 1 and s[0]["host"] == sys.argv[2] and s[0]["slowdown"] > 1.2, s
assert s[0]["step"] <= 45, s
' "$d/m.jsonl" "$host"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -Eq "^slurm_train_rank_slowdown\{job_id=\"[0-9]+\",job_name=\"[^\"]*\",rank=\"1\",host=\"$host\"\} [0-9.]+$" "$d/p.prom"
}

@test "--exclude-stragglers: a straggler's node is left out at the next restart" {
  job=$(submit_restarting excluding --inject-fault slow@200:1,nan@60:0)
  sed -i "s|srun --spare-nodes 1|srun --exclude-stragglers --spare-nodes 1|" "$d/excluding.sh"
  scancel "$job"
  job=$(sbatch --parsable "$d/excluding.sh")
  run wait_job "$job" 300
  cat "$d/excluding.out"
  [ "$output" = COMPLETED ]
  grep -q "straggler: rank 1 (node2" "$d/excluding.out"
  grep -q "slurm-train srun: leaving node2 out of the job: a rank there was named a straggler (--exclude-stragglers)" \
    "$d/excluding.out"
  grep -q "slurm-train srun: step ended after .*: diverged (exit 9)" "$d/excluding.out"
  grep -q "slurm-train srun: restart 1 of 3 on node1,node3:" "$d/excluding.out"
  h5diff "$BATS_FILE_TMPDIR/straight.h5" "$d/excluding.h5" /model /model
}

@test "exec: the PyTorch DDP example with --slow-ms 200 --slow-rank 1 on 2 ranks: rank 1 is named a straggler with its node, from the heartbeat's compute seconds" {
  $PY -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
  run srun -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" exec --log-dir "$d/logs" -- $PY "$ROOT/examples/pytorch_ddp.py" \
    --steps 60 --log-every 60 --slow-ms 200 --slow-rank 1
  echo "$output"
  [ "$status" -eq 0 ]
  host=$(grep -ohE 'exec: rank 1 of 2 on [^:]+' "$d"/logs/*/rank-1.log | sed 's/.* on //')
  [ -n "$host" ]
  # Named once, within its first windows (every step 200 ms longer: 10 steps a window of 2 s).
  [[ $output =~ straggler:\ rank\ 1\ \(([^,]+),\ pid\ [0-9]+,\ [^\)]+\)\ computes\ ([0-9.]+)x\ the\ ranks\'\ median ]]
  [ "${BASH_REMATCH[1]}" = "$host" ]
  awk -v x="${BASH_REMATCH[2]}" 'BEGIN { exit !(x > 1.2) }'
  [ "$(grep -c 'straggler: rank' <<<"$output")" -eq 1 ]
  grep -q "straggler: rank 1 ($host, pid" "$d"/logs/*/rank-0.log
}

@test "exec: --exclude-stragglers leaves the node of the DDP example's slow rank out at the next restart" {
  $PY -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
  {
    echo '#!/bin/bash'
    echo "#SBATCH --nodes=3 --no-kill --ntasks-per-node=1 --output=$d/slow.out"
    printf '%q ' "$BUILD/bin/slurm-train" srun --exclude-stragglers --spare-nodes 1 --log-dir "$d/logs" -- \
      "$BUILD/bin/slurm-train" exec --log-dir "$d/logs" -- $PY "$ROOT/examples/pytorch_ddp.py" --steps 80 \
      --log-every 80 --ckpt "$d/slow.pt" --ckpt-every 40 --slow-ms 200 --slow-rank 1 --fail-at-step 60 --fail-rank 0
    echo
  } >"$d/slow.sh"
  job=$(sbatch --parsable "$d/slow.sh")
  run wait_job "$job" 300
  cat "$d/slow.out"
  [ "$output" = COMPLETED ]
  grep -q "straggler: rank 1 (node2" "$d/slow.out"
  grep -q "slurm-train srun: leaving node2 out of the job: a rank there was named a straggler (--exclude-stragglers)" \
    "$d/slow.out"
  grep -q "slurm-train srun: restart 1 of 3 on node1,node3:" "$d/slow.out"
  grep -q "resumed from $d/slow.pt at step 40" "$d/slow.out"
}

@test "Ctrl-C (SIGINT twice) to the supervisor cancels the step: no restart, no node blamed" {
  job=$(submit_restarting interrupted --inject-fault slow@50)
  out=$d/interrupted.out
  for _ in $(seq 1200); do grep -q 'step 100/300' "$out" 2>/dev/null && break; sleep 0.1; done
  grep -q 'step 100/300' "$out"
  supervisor=$(pgrep -f "slurm-train srun --spare-nodes 1 --restarts 3 --log-dir $d/logs")
  kill -INT "$supervisor"
  sleep 0.3
  kill -INT "$supervisor"
  run wait_job "$job" 300
  cat "$out"
  grep -q "slurm-train srun: the job got signal 2 (preemption or scancel): not restarting" "$out"
  ! grep -q "slurm-train srun: restart 1" "$out"
  ! grep -q "leaving .* out of the job" "$out"
  run $PY -c 'import json, sys; a = [json.loads(l) for l in open(sys.argv[1])]; assert len(a) == 1 and a[0]["left_out"] == [], a' \
    "$d/logs/$job/restarts.jsonl"
  [ "$status" -eq 0 ]
}

@test "before a restart the chosen nodes check themselves: a spare whose slurmd is stuck is left out; --allow-fewer goes on with one node" {
  SUPERVISOR=(--allow-fewer --node-check-timeout 5)
  job=$(submit_restarting stuck-spare --inject-fault crash@100:1,slow@20)
  out=$d/stuck-spare.out
  # Once the first step trains (on node1 and node2; the crash at step 100 comes 2 s later or more).
  for _ in $(seq 300); do grep -Eq '^  rank +1  host node2' "$out" 2>/dev/null && break; sleep 0.1; done
  # The spare's slurmd stopped: its port still accepts a connection (the kernel's backlog), so
  # only the node's own check, which never starts there, finds it.
  slurmd=$(for p in $(ip netns pids "sltr$TEST_CLUSTER_PORT-node3"); do [[ $(cat /proc/$p/comm) = slurmd ]] && echo $p; done)
  [ -n "$slurmd" ]
  kill -STOP $slurmd
  run wait_job "$job" 300
  kill -CONT $slurmd
  cat "$out"
  [ "$output" = COMPLETED ]
  grep -q "slurm-train srun: node checks on node1,node3: 1 unfit" "$out"
  grep -q "slurm-train srun: leaving node3 out of the job: its node check (slurm-train doctor --node) did not report within 5 s" "$out"
  grep -q "slurm-train srun: node checks on node1: ok" "$out"
  grep -q "slurm-train srun: restart 1 of 3 on node1:" "$out"
  grep -q "slurm-train srun: training finished; 1 restart(s) inside the job; nodes left out: node2,node3" "$out"
  # node3 answers Slurm again before the next test.
  for _ in $(seq 300); do [[ $(sinfo -h -n node3 -o %T) = idle ]] && break; sleep 0.2; done
}

# Last: the node it kills stays down for the rest of this file.
@test "a whole training node killed (its slurmd too): the same job restarts on the spare within seconds, the same final bits" {
  job=$(submit_restarting node-lost --inject-fault slow@20)
  out=$d/node-lost.out
  for _ in $(seq 1200); do grep -q 'step 100/300' "$out" 2>/dev/null && break; sleep 0.1; done
  grep -q 'step 100/300' "$out"
  # Every process of node2's network namespace: slurmd, slurmstepd and the rank.
  kill -KILL $(ip netns pids "sltr$TEST_CLUSTER_PORT-node2")
  # The job stays COMPLETING until Slurm marks node2 DOWN (SlurmdTimeout): its script's end is the test's.
  for _ in $(seq 600); do grep -q 'slurm-train srun: training finished' "$out" && break; sleep 0.1; done
  check_recovered node-lost node2
  grep -q "slurm-train srun: leaving node2 out of the job: its slurmd (.*) refused a connection" "$out"
}
