#!/usr/bin/env bats
# The Python helper (python/slurm_train) under slurm-train exec on a two-node cluster: its errors
# outside exec, atomic saves and latest(), the figures of heartbeat() in rank 0's metrics and
# Prometheus files, time_left() and restart_count() in a job, done() against a requeue, and the
# PyTorch DDP example on the helper signalled five times at random (once during an evaluation).

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
  export PYTHONPATH=$ROOT/python
}

need_torch() {
  $PY -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (scripts/install-deps.sh)"
}

@test "helper: outside exec, heartbeat, done and restart_count say how to run; time_left says there is no job; stop_requested needs torch.distributed for several ranks" {
  run --separate-stderr env -u SLURM_TRAIN_HEARTBEAT -u SLURM_TRAIN_PROGRAM_PIPE -u SLURM_JOB_ID $PY - <<'EOF'
import slurm_train as s
for call in (lambda: s.heartbeat(1, loss=0.5), s.done, s.restart_count, s.time_left):
    try:
        call()
        print("no error")
    except s.NotUnderExec as e:
        print("NotUnderExec:", str(e).splitlines()[0])
print("stop", s.stop_requested(), "under exec", s.under_exec())
import os
os.environ["WORLD_SIZE"] = "4"
try:
    s.stop_requested()
except RuntimeError as e:
    print("RuntimeError:", e)
EOF
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"NotUnderExec: slurm_train.heartbeat() needs \`slurm-train exec\`, and SLURM_TRAIN_HEARTBEAT is not set: run the program as"* ]]
  [[ $output == *"NotUnderExec: slurm_train.done() needs \`slurm-train exec\`, and SLURM_TRAIN_PROGRAM_PIPE is not set"* ]]
  [[ $output == *"NotUnderExec: slurm_train.restart_count() needs"* ]]
  [[ $output == *"NotUnderExec: slurm_train.time_left(): not in a Slurm job (SLURM_JOB_ID is not set)"* ]]
  [[ $output == *"stop False under exec False"* ]]
  [[ $output == *"RuntimeError: slurm_train.stop_requested(): WORLD_SIZE=4 but torch.distributed is not initialised"* ]]
  [[ $output != *"no error"* ]]
}

@test "helper: save() killed mid-write leaves the old checkpoint whole; latest() takes the highest step and never a temporary" {
  dir=$BATS_TEST_TMPDIR/ckpt
  run --separate-stderr $PY - "$dir" <<'EOF'
import os, signal, sys, slurm_train as s
d = sys.argv[1]
print("empty", s.latest(d))
s.save(b"old" * 1000, f"{d}/step-00000090.pt")
s.save(b"x", f"{d}/step-00000100.pt")
s.save({"step": 120}, f"{d}/step-00000120.pt")   # pickled: torch is not imported
if os.fork() == 0:
    def half_then_die(f):
        f.write(b"new" * 500)
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    s.save(half_then_die, f"{d}/step-00000090.pt")
    os._exit(0)
_, status = os.wait()
print("writer killed", os.WIFSIGNALED(status))
print("old intact", open(f"{d}/step-00000090.pt", "rb").read() == b"old" * 1000)
print("temporaries", len([n for n in os.listdir(d) if n.startswith(".slurm-train-tmp.")]))
print("latest", os.path.basename(s.latest(d)))
import pickle
print("loaded", pickle.load(open(s.latest(d), "rb")))
EOF
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"empty None"* ]]
  [[ $output == *"writer killed True"* ]]
  [[ $output == *"old intact True"* ]]
  [[ $output == *"temporaries 1"* ]]
  [[ $output == *"latest step-00000120.pt"* ]]
  [[ $output == *"loaded {'step': 120}"* ]]
}

@test "helper: save() gives a checkpoint the mode the umask allows (027: 0640, 077: 0600) and never calls os.umask(), which changes it for every thread" {
  dir=$BATS_TEST_TMPDIR/modes
  run --separate-stderr $PY - "$dir" <<'EOF'
import os, stat, sys, slurm_train as s
d = sys.argv[1]
real_umask, calls = os.umask, []
def watched_umask(mask):
    calls.append(mask)
    return real_umask(mask)
for mask, name in ((0o027, "a"), (0o077, "b")):
    real_umask(mask)
    os.umask = watched_umask
    path = s.save(b"x", f"{d}/{name}-1.pt")
    os.umask = real_umask
    print(f"umask {mask:03o}: mode {stat.S_IMODE(os.stat(path).st_mode):04o}")
print("os.umask calls", calls)
print("umask now", f"{real_umask(0o022):03o}")
EOF
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"umask 027: mode 0640"* ]]
  [[ $output == *"umask 077: mode 0600"* ]]
  [[ $output == *"os.umask calls []"* ]]
  [[ $output == *"umask now 077"* ]]
}

@test "helper: latest() walks to the folder as the launcher does: refuses one another user could write to, one in a folder every user can write to, a link another user planted in a sticky folder; follows a trusted link; a sticky folder above (/tmp) and a group-writable one are fine" {
  base=$BATS_TEST_TMPDIR/trust
  mkdir -p "$base"
  run --separate-stderr $PY - "$base" <<'EOF'
import os, sys, slurm_train as s
base = sys.argv[1]
def folder(name, mode, parent=None):
    path = os.path.join(parent or base, name)
    os.mkdir(path)
    s.save(b"x", f"{path}/step-00000100.pt")
    os.chmod(path, mode)
    return path
def latest(label, path):
    try:
        print(label, "->", os.path.relpath(s.latest(path), base))
    except s.UntrustedFolder as e:
        print(label, "refused:", str(e).replace(base, "BASE"))
latest("own", folder("own", 0o755))
latest("group-writable", folder("group", 0o775))
latest("world-writable", folder("open", 0o777))
other = folder("other", 0o755)
os.chown(other, 65534, 65534)
latest("another user's", other)
os.symlink(os.path.join(base, "own"), os.path.join(base, "link"))
latest("link", os.path.join(base, "link"))
shared = folder("shared", 0o777)
sticky_links = folder("sticky-links", 0o1777)
os.symlink(os.path.join(base, "own"), os.path.join(sticky_links, "mine"))
latest("my link in a sticky folder", os.path.join(sticky_links, "mine"))
os.symlink(os.path.join(base, "own"), os.path.join(sticky_links, "planted"))
os.lchown(os.path.join(sticky_links, "planted"), 65534, 65534)
latest("a link another user planted in a sticky folder", os.path.join(sticky_links, "planted"))
latest("in a world-writable folder", folder("ckpt", 0o755, shared))
sticky = folder("sticky", 0o1777)
latest("in a sticky folder", folder("ckpt", 0o755, sticky))
print("missing ->", s.latest(os.path.join(base, "missing")))
EOF
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"own -> own/step-00000100.pt"* ]]
  [[ $output == *"group-writable -> group/step-00000100.pt"* ]]
  [[ $output == *"world-writable refused: slurm_train.latest(): the checkpoint folder 'BASE/open' can be written by every user (mode 0777): anyone could plant or replace what the job reads there. Use a folder of your own, or chmod o-w it"* ]]
  [[ $output == *"another user's refused: slurm_train.latest(): the checkpoint folder 'BASE/other' belongs to nobody (uid 65534), not to this process's user"* ]]
  [[ $output == *"link -> link/step-00000100.pt"* ]]
  [[ $output == *"my link in a sticky folder -> sticky-links/mine/step-00000100.pt"* ]]
  [[ $output == *"a link another user planted in a sticky folder refused: slurm_train.latest(): the checkpoint folder 'BASE/sticky-links/planted': 'BASE/sticky-links/planted' is a link (to 'BASE/own') that nobody (uid 65534) made in 'BASE/sticky-links', a folder every user can write (mode 1777)"* ]]
  [[ $output == *"in a world-writable folder refused: slurm_train.latest(): 'BASE/shared', a folder on the way to the checkpoint folder 'BASE/shared/ckpt', can be written by every user and is not sticky (mode 0777)"* ]]
  [[ $output == *"in a sticky folder -> sticky/ckpt/step-00000100.pt"* ]]
  [[ $output == *"missing -> None"* ]]
}

@test "helper: heartbeat figures of a 2-node exec reach rank 0's metrics and Prometheus files; a bad name is a clear error; a bad pipe line is named once and ignored" {
  work=$BATS_TEST_TMPDIR/figures
  mkdir -p "$work"
  cat >"$work/prog.py" <<'EOF'
import os, slurm_train as s
rank = int(os.environ["RANK"])
try:
    s.heartbeat(0, **{"bad name": 1})
except ValueError as e:
    print("ValueError:", e)
with open(os.environ["SLURM_TRAIN_PROGRAM_PIPE"], "w") as pipe:
    pipe.write("not json\n{\"step\": 1, \"metrics\": {\"x\": \"text\"}}\n")
for step in range(1, 6):
    s.heartbeat(step, 0.01, loss=1.0 / step + rank, lr=0.1, nan=float("nan"))
print("rank", rank, "restarts", s.restart_count())
EOF
  run --separate-stderr srun -N2 -n2 "$ST" exec --log-dir="$work/logs" --metrics="$work/m-{job}.jsonl" \
    --prometheus="$work/job.prom" -- $PY "$work/prog.py"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"ValueError: slurm_train.heartbeat(): metric name 'bad name': expected letters, digits and _ . / -"* ]]
  [[ $output == *"rank 0 restarts 0"* ]]
  [ "$(grep -c 'is not understood' <<<"$stderr")" -eq 1 ]
  [[ $stderr == *"a line the program wrote to \$SLURM_TRAIN_PROGRAM_PIPE is not understood: 'not json': expected a JSON object; ignored"* ]]
  metrics=$(ls "$work"/m-*.jsonl)
  cat "$metrics"
  # Rank 0's figures, every step, in order; the NaN as null.
  [ "$(grep -c '"program"' "$metrics")" -eq 5 ]
  $PY - "$metrics" <<'EOF'
import json, sys
lines = [json.loads(l)["program"] for l in open(sys.argv[1])]
assert [l["step"] for l in lines] == [1, 2, 3, 4, 5], lines
assert [round(l["loss"], 6) for l in lines] == [1.0, 0.5, 0.333333, 0.25, 0.2], lines
assert all(l["lr"] == 0.1 and l["nan"] is None and l["time"] > 1.7e9 for l in lines), lines
EOF
  cat "$work/job.prom"
  grep -qE '^slurm_train_program_step\{job_id="[0-9]+",job_name="[^"]*"\} 5$' "$work/job.prom"
  grep -qE '^slurm_train_program_metric\{job_id="[0-9]+",job_name="[^"]*",metric="loss"\} 0.2$' "$work/job.prom"
  grep -qE '^slurm_train_program_metric\{.*metric="nan"\} NaN$' "$work/job.prom"
}

@test "helper: time_left() in a job of 5 minutes is under 300 s and counts down; restart_count() adds requeues and in-job restarts" {
  run --separate-stderr srun -N1 -n1 --time=5 "$ST" exec --log-dir= -- $PY -c '
import time, slurm_train as s
a = s.time_left(); time.sleep(1.2); b = s.time_left()
print(f"left {a:.1f} then {b:.1f}")'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  read -r a b < <(sed -n 's/^left \([0-9.]*\) then \([0-9.]*\)$/\1 \2/p' <<<"$output")
  $PY -c "import sys; a, b = $a, $b; sys.exit(0 if 200 < a <= 300 and 0.9 < a - b < 1.6 else 1)"
  run --separate-stderr env SLURM_RESTART_COUNT=2 SLURM_TRAIN_RESTART_COUNT=1 "$ST" exec --log-dir= -- \
    $PY -c 'import slurm_train as s; print("restarts", s.restart_count())'
  [[ $output == *"restarts 3"* ]]
}

@test "helper: a preemption signal after done() ends a requeueable job without requeueing it; before done() it requeues" {
  work=$BATS_TEST_TMPDIR/done
  mkdir -p "$work"
  cat >"$work/job.sbatch" <<EOF
#!/bin/bash
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=$work/job-%j.out
srun "$ST" exec --log-dir="$work/logs" -- $PY -c '
import os, signal, time, slurm_train as s
s.heartbeat(1 + s.restart_count())
if os.environ.get("SAY_DONE") or s.restart_count() > 0:
    s.done()
time.sleep(0.5)
os.kill(os.getppid(), signal.SIGUSR1)   # the supervisor, as Slurm would signal it
while not s.stop_requested():
    time.sleep(0.1)
print("stopped by", s.stop_signal(), "after", s.restart_count(), "restarts")'
EOF
  # Without done(): requeued once; the second run says done() first, and is not requeued again.
  job=$(PYTHONPATH=$ROOT/python sbatch --parsable "$work/job.sbatch")
  run wait_job "$job" 120
  cat "$work/job-$job.out"
  [ "$output" = COMPLETED ]
  grep -q "preempted (SIGUSR1): its program reported step 1; requeued job $job (exit 5)" "$work/job-$job.out"
  grep -q "stopped by SIGUSR1 after 1 restarts" "$work/job-$job.out"
  grep -q "not requeued: the program had said it was done (slurm_train.done()) (exit 0)" "$work/job-$job.out"
  [ "$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')" -eq 1 ]
}

# last_program_step METRICS: the newest step of the program's figures in exec's metrics file (0: none yet).
last_program_step() {
  [ -f "$1" ] || { echo 0; return; }
  sed -n 's/.*"program":{.*"step":\([0-9]*\).*/\1/p' "$1" | tail -1 | grep . || echo 0
}

@test "helper: examples/pytorch-ddp.sbatch on the helper, 4 ranks on 2 nodes, USR1 at 5 random moments (one in an evaluation): each time every rank stops at the same step, the job requeues and resumes, and ends with the uninterrupted run's loss; its figures in the job's JSONL and Prometheus files" {
  need_torch
  work=$BATS_TEST_TMPDIR/ddp5
  mkdir -p "$work/prom"
  ln -s "$ROOT/examples" "$work/examples"
  ARGS=(--steps 200 --log-every 5 --eval-every 50 --eval-sleep 2 --step-sleep 0.1)
  (cd "$work" && srun -N2 -n4 "$ST" exec --log-dir= -- $PY "$DDP" "${ARGS[@]}" >uninterrupted.out 2>&1)
  expected=$(grep '^final loss' "$work/uninterrupted.out")
  [ -n "$expected" ]

  # Five moments, one in each fifth of the run (apart by 10 steps at least, so that each lands in
  # a new run); the second or third is the evaluation at step 50 or 100 instead.
  seed=${TEST_SEED:-$RANDOM}
  echo "moments drawn with TEST_SEED=$seed"
  RANDOM=$seed
  moments=()
  for i in 0 1 2 3 4; do moments+=($((i * 38 + 5 + RANDOM % 29))); done
  in_eval=$((1 + RANDOM % 2))
  eval_step=$((in_eval * 50))
  echo "steps ${moments[*]}; slot $in_eval: during the evaluation at step $eval_step"

  job=$(cd "$work" && PATH="$BUILD/bin:$PATH" PYTHON=$PY PROMETHEUS=$work/prom/ddp.prom \
    sbatch --parsable examples/pytorch-ddp.sbatch "${ARGS[@]}")
  out=$work/pytorch-ddp-$job.out
  metrics=$work/slurm-train-logs/$job/metrics.jsonl
  deadline=$((SECONDS + 600))
  for i in 0 1 2 3 4; do
    if [ "$i" -eq "$in_eval" ]; then
      until grep -q "evaluating at step $eval_step" "$out" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || { cat "$out"; false; }
        sleep 0.1
      done
    else
      until [ "$(last_program_step "$metrics")" -ge "${moments[$i]}" ]; do
        [ $SECONDS -lt $deadline ] || { cat "$out"; false; }
        sleep 0.1
      done
    fi
    scancel --signal=USR1 "$job"
    until [ "$(grep -c "requeued job $job (exit 5)" "$out")" -eq $((i + 1)) ]; do
      [ $SECONDS -lt $deadline ] || { cat "$out"; false; }
      sleep 0.2
    done
  done
  run wait_job "$job" $((deadline - SECONDS))
  cat "$out"
  [ "$output" = COMPLETED ]
  [ "$(grep -c "^final loss" "$out")" -eq 1 ]
  [ "$(grep '^final loss' "$out")" = "$expected" ]

  # Every rank stopped at the same step each time, and the next run resumed there.
  logs=$work/slurm-train-logs/$job
  stops=$(sed -n 's/.* rank 0: rank 0 stops at step \([0-9]*\) (SIGUSR1)$/\1/p' "$logs/rank-0.log" | paste -sd' ')
  echo "stops: $stops"
  [ "$(wc -w <<<"$stops")" -eq 5 ]
  for r in 1 2 3; do
    [ "$(sed -n "s/.* rank $r: rank $r stops at step \([0-9]*\) (SIGUSR1)$/\1/p" "$logs/rank-$r.log" | paste -sd' ')" = "$stops" ]
  done
  resumed=$(sed -n "s/^resumed from checkpoints\/pytorch-ddp-$job.pt at step \([0-9]*\)$/\1/p" "$out" | paste -sd' ')
  [ "$resumed" = "$stops" ]
  # The stop in the evaluation came at its step, once rank 0 had evaluated.
  [ "$(cut -d' ' -f$((in_eval + 1)) <<<"$stops")" -eq "$eval_step" ]

  # The figures: the loss every 5 steps and the evaluations, to the end; the newest in Prometheus.
  $PY - "$metrics" <<'PYEOF'
import json, sys
lines = [json.loads(l)["program"] for l in open(sys.argv[1]) if '"program"' in l]
steps = {l["step"] for l in lines if "loss" in l}
assert steps >= set(range(5, 201, 5)), sorted(steps)
evals = {l["step"] for l in lines if "test_loss" in l and "test_accuracy" in l}
assert evals >= {50, 100, 150, 200}, sorted(evals)
PYEOF
  cat "$work/prom/ddp.prom"
  grep -qE "^slurm_train_program_step\{job_id=\"$job\",job_name=\"pytorch-ddp\"\} 200$" "$work/prom/ddp.prom"
  grep -qE "^slurm_train_program_metric\{job_id=\"$job\",job_name=\"pytorch-ddp\",metric=\"test_accuracy\"\} 0\.[0-9]+$" \
    "$work/prom/ddp.prom"
}
