#!/usr/bin/env bats
# TensorBoard event files: a two-rank run's (train.tensorboard), read back by a decoder of the
# published format (tensorboard_events.py, which checks every record's CRC) and compared with the
# run's own metrics file; the program's figures under exec --tensorboard; a folder that cannot be
# written; a damaged file refused. (TensorBoard's own reader reads the same files in gpu-check.sh,
# where TensorBoard is installed: Debian 12 has no package of it.)

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

setup() {
  ST=$BUILD/bin/slurm-train
  DECODE=$ROOT/test/integration/tensorboard_events.py
  set_small_args
  export PYTHONPATH=$ROOT/python
}

@test "tensorboard: a 2-rank run writes rank 0's scalars every step (the metrics file's values), its evaluations, and every tensor's weights and gradients every 50 steps" {
  out=$BATS_TEST_TMPDIR/tb
  mkdir -p "$out"
  run --separate-stderr srun --mpi=pmix -N2 -n2 "$ST" run "${SMALL[@]}" --train.steps 240 \
    --train.metrics "$out/metrics.jsonl" --train.tensorboard "$out/tb-{job}" --train.tensorboard_histograms 50
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"TensorBoard events in $out/tb-"*"/events.out.tfevents."* ]]
  [ "$(ls "$out"/tb-*/ | wc -l)" -eq 1 ]  # rank 0's file alone
  $PY "$DECODE" "$out"/tb-* >"$out/events.jsonl"
  $PY - "$out/events.jsonl" "$out/metrics.jsonl" <<'EOF'
import json, struct, sys
events = [json.loads(l) for l in open(sys.argv[1])]
metrics = [json.loads(l) for l in open(sys.argv[2])]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
assert events[0] == {"file_version": "brain.Event:2"}, events[0]
def scalars(tag):
    return {e["step"]: e["value"] for e in events if e.get("tag") == tag}
steps = [m for m in metrics if "loss" in m and "step" in m]
loss = scalars("train/loss")
assert sorted(loss) == list(range(1, 241)), sorted(loss)[:5]
for m in steps:
    assert loss[m["step"] + 1] == f32(m["loss"]), (m["step"], loss[m["step"] + 1], m["loss"])
    assert scalars("train/lr")[m["step"] + 1] == f32(m["lr"])
for tag in ("train/accuracy", "train/grad_norm", "train/samples_per_s", "time/data", "time/forward",
            "time/backward", "time/comm_wait", "time/optimizer", "time/checkpoint"):
    assert len(scalars(tag)) == 240, tag
evals = [m["eval"] for m in metrics if "eval" in m]
assert evals and scalars("eval/loss") == {e["step"]: f32(e["test_loss"]) for e in evals}, scalars("eval/loss")
assert scalars("eval/accuracy") == {e["step"]: f32(e["test_accuracy"]) for e in evals}
# The MLP 784-64-32-10: each tensor's weights and gradients at steps 50..200, all values counted.
sizes = {"layer1.weight": 784 * 64, "layer1.bias": 64, "layer2.weight": 64 * 32, "layer2.bias": 32,
         "layer3.weight": 32 * 10, "layer3.bias": 10}
histograms = [e for e in events if "histogram" in e]
for kind in ("weights", "gradients"):
    for name, size in sizes.items():
        h = [e for e in histograms if e["tag"] == f"{kind}/{name}"]
        assert [e["step"] for e in h] == [50, 100, 150, 200], (kind, name, [e["step"] for e in h])
        for e in h:
            hist = e["histogram"]
            assert hist["num"] == size and sum(hist["bucket"]) == size, (name, hist["num"])
            assert hist["min"] <= hist["max"] and len(hist["bucket"]) == len(hist["bucket_limit"])
            assert hist["bucket_limit"] == sorted(hist["bucket_limit"])
print("checked", len(events), "records")
EOF
}

@test "tensorboard: exec --tensorboard turns the program's heartbeat figures into scalars, by name and step" {
  out=$BATS_TEST_TMPDIR/tbexec
  run --separate-stderr srun -N2 -n2 "$ST" exec --log-dir= --tensorboard "$out/{job}" -- $PY -c '
import os, slurm_train as s
for step in range(1, 11):
    s.heartbeat(step, loss=1.0 / step, rank=float(os.environ["RANK"]))'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  run $PY "$DECODE" "$out"/*
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '"tag": "loss"' <<<"$output")" -eq 10 ]
  [[ $output == *'{"step": 4, "wall_time": '*', "tag": "loss", "value": 0.25}'* ]]
  # Rank 0's alone.
  [ "$(grep -c '"tag": "rank", "value": 0.0}' <<<"$output")" -eq 10 ]
  [[ $output != *'"tag": "rank", "value": 1.0}'* ]]
}

@test "tensorboard: a folder that cannot be written is a warning, and the training goes on; a damaged file is refused naming file and offset" {
  touch "$BATS_TEST_TMPDIR/a-file"
  run --separate-stderr "$ST" run "${SMALL[@]}" --train.steps 20 --train.tensorboard "$BATS_TEST_TMPDIR/a-file/tb" --log-dir=
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output$stderr == *"warning: train.tensorboard = '$BATS_TEST_TMPDIR/a-file/tb': "*"'$BATS_TEST_TMPDIR/a-file': Not a directory; training goes on without it"* ]]
  [[ $output == *"final: test_acc"* ]]
  run "$ST" run "${SMALL[@]}" --train.tensorboard_histograms=-1 --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"train.tensorboard_histograms = -1: expected 0 (none) or a number of steps"* ]]

  good=$BATS_TEST_TMPDIR/good
  "$ST" run "${SMALL[@]}" --train.steps 5 --train.tensorboard "$good" --log-dir= >/dev/null
  file=$(ls "$good"/events.out.tfevents.*)
  # One bit of the third record's payload flipped: its CRC no longer matches.
  $PY -c "
import sys
data = bytearray(open(sys.argv[1], 'rb').read())
data[200] ^= 0x10
open(sys.argv[1], 'wb').write(data)" "$file"
  run --separate-stderr $PY "$DECODE" "$file"
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"$file"*"offset"* ]]
}

@test "tensorboard: a run resumed after a crash marks the restart, and TensorBoard's view shows each step once, the resumed run's" {
  out=$BATS_TEST_TMPDIR/resumed
  # Killed in step 150, after the checkpoint of step 100: steps 101-150 are in its event file.
  run --separate-stderr "$ST" run "${SMALL[@]}" --train.steps 240 --ckpt.dir "$out/ck" --ckpt.every 100 \
    --train.tensorboard "$out/tb" --log-dir= --inject-fault crash@150:0
  echo "$output"; echo "$stderr"
  [ "$status" -ne 0 ]
  run --separate-stderr "$ST" run "${SMALL[@]}" --train.steps 240 --ckpt.dir "$out/ck" --ckpt.every 100 \
    --train.tensorboard "$out/tb" --log-dir= --train.metrics "$out/metrics.jsonl"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $out/ck/step-00000100.h5 at step 100"* ]]
  [ "$(ls "$out"/tb/events.out.tfevents.* | wc -l)" -eq 2 ]
  $PY "$DECODE" "$out/tb" >"$out/all.jsonl"
  $PY "$DECODE" --shown "$out/tb" >"$out/shown.jsonl"
  $PY - "$out/all.jsonl" "$out/shown.jsonl" "$out/metrics.jsonl" <<'PYEOF'
import collections, json, struct, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
shown = [json.loads(l) for l in open(sys.argv[2])]
metrics = [json.loads(l) for l in open(sys.argv[3])]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
# As written: the crashed run's steps 1-150, then the restart at step 101, then 101-240.
starts = [l for l in lines if "session_log" in l]
assert [(s["step"], s["session_log"]) for s in starts] == [(101, "START")], starts
written = [l["step"] for l in lines if l.get("tag") == "train/loss"]
assert written == list(range(1, 151)) + list(range(101, 241)), (written[:3], len(written))
# As TensorBoard shows the run: each step once, from 101 on the resumed run's values.
loss = [(p["step"], p["value"]) for p in shown if p["tag"] == "train/loss"]
assert [s for s, _ in loss] == list(range(1, 241)), [s for s, _ in loss][:3]
resumed = {m["step"] + 1: f32(m["loss"]) for m in metrics if "loss" in m and "step" in m}
assert min(resumed) == 101 and all(dict(loss)[s] == v for s, v in resumed.items())
counts = collections.Counter((p["tag"], p["step"]) for p in shown)
assert max(counts.values()) == 1, counts.most_common(1)
print("restart at 101;", len(written), "points written,", len(loss), "shown")
PYEOF
}

@test "tensorboard: exec --tensorboard of a requeued job marks the restart at the program's first step, and TensorBoard's view shows each step once" {
  out=$BATS_TEST_TMPDIR/tbrequeue
  program='
import slurm_train as s, sys
first, last, loss = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
for step in range(first, last + 1):
    s.heartbeat(step, loss=loss)'
  # The first run reports steps 1-10; the requeued one resumed from its checkpoint of step 5.
  run srun -N1 -n1 "$ST" exec --log-dir= --tensorboard "$out/tb" -- $PY -c "$program" 1 10 1.0
  [ "$status" -eq 0 ]
  run env SLURM_RESTART_COUNT=1 srun -N1 -n1 "$ST" exec --log-dir= --tensorboard "$out/tb" -- $PY -c "$program" 6 12 2.0
  [ "$status" -eq 0 ]
  run $PY "$DECODE" "$out/tb"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '"session_log": "START"' <<<"$output")" -eq 1 ]
  [[ $output == *'{"step": 6, "wall_time": '*', "session_log": "START"}'* ]]
  run $PY "$DECODE" --shown "$out/tb"
  echo "$output"
  [ "$(grep -c '"tag": "loss"' <<<"$output")" -eq 12 ]
  for step in 1 5; do [[ $output == *"{\"step\": $step, \"wall_time\": "*', "tag": "loss", "value": 1.0}'* ]]; done
  for step in 6 12; do [[ $output == *"{\"step\": $step, \"wall_time\": "*', "tag": "loss", "value": 2.0}'* ]]; done
}
