#!/usr/bin/env bats
# ckpt.keep_best: a run that overfits (1,000 training images, no dropout, a constant rate) keeps
# the checkpoint of its lowest test loss as `best` while `ckpt.keep = 1` removes the others; the
# marker survives a kill in the middle of a slowed checkpoint write and a resume on another number
# of ranks; `ckpt list` marks it and `ckpt verify DIR/best` reads it by name.

load helpers

setup_file() {
  ensure_fashion_mnist
  export SMALL_TRAIN=$BATS_FILE_TMPDIR/train-1000.h5
  $PY - "$TEST_DATA/train.h5" "$SMALL_TRAIN" <<'EOF2'
import sys, h5py
with h5py.File(sys.argv[1]) as src, h5py.File(sys.argv[2], "w") as dst:
    dst["images"] = src["images"][:1000]
    dst["labels"] = src["labels"][:1000]
EOF2
}

setup() {
  ST=$BUILD/bin/slurm-train
  OVERFIT=(--config "$ROOT/examples/fashion-mnist.toml" --data.train "$SMALL_TRAIN" --data.test "$TEST_DATA/test.h5"
    --model.hidden "[256]" --model.dropout 0 --train.lr 0.003 --train.schedule constant --train.label_smoothing 0
    --train.global_batch 100 --train.eval_batch 5000 --ckpt.keep 1 --ckpt.keep_best test_loss --log-dir=)
}

# best_of METRICS...: "STEP LOSS" of the lowest test loss in the eval lines of these metrics files.
best_of() {
  $PY - "$@" <<'EOF2'
import json, sys
evals = {}
for path in sys.argv[1:]:
    for line in open(path):
        e = json.loads(line).get("eval")
        if e:
            evals[e["step"]] = e["test_loss"]
step = min(evals, key=lambda s: (evals[s], s))
last = max(evals)
print(step, evals[step], last, evals[last])
EOF2
}

@test "keep_best: the test loss falls then rises; 'best' is the step of its lowest in the metrics file, kept while keep = 1 removes the rest; ckpt list marks it" {
  d=$BATS_TEST_TMPDIR
  run --separate-stderr "$ST" run "${OVERFIT[@]}" --train.epochs 40 --train.metrics "$d/m.jsonl" --ckpt.dir "$d/ck"
  echo "$output" | grep -E "best|final"; echo "$stderr"
  [ "$status" -eq 0 ]
  read -r step loss last last_loss < <(best_of "$d/m.jsonl")
  echo "lowest test loss $loss at step $step; the last, step $last: $last_loss"
  # It overfitted: the lowest is well before the end and the end is worse by 5% at least.
  [ "$step" -lt "$last" ]
  awk -v a="$last_loss" -v b="$loss" 'BEGIN { exit !(a > 1.05 * b) }'
  [ "$(head -1 "$d/ck/best")" = "$(printf 'step-%08d.h5' "$step")" ]
  [[ $output == *"best test_loss so far: "*" at step $step; its checkpoint is kept as 'best'"* ]]
  # keep = 1: the newest and the best alone.
  [ "$(ls "$d/ck" | grep -cE '^step-[0-9]+\.h5$')" -eq 2 ]
  run "$ST" ckpt list "$d/ck"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -qE "^ +$step +.* valid  best \(test_loss " <<<"$output"
  grep -qE "^ +$last +.* valid$" <<<"$output"
  run "$ST" ckpt verify "$d/ck/best"
  [ "$status" -eq 0 ]
  [[ $output == *"OK   $d/ck/$(printf 'step-%08d.h5' "$step")"* ]]
}

@test "keep_best: SIGKILLed in the middle of a slowed checkpoint write, then resumed on 2 ranks: 'best' still verifies and ends at the lowest test loss of both runs" {
  d=$BATS_TEST_TMPDIR
  # shellcheck disable=SC2046
  "$ST" run "${OVERFIT[@]}" --train.epochs 60 --train.metrics "$d/m1.jsonl" --ckpt.dir "$d/ck" --ckpt.every 10 \
    --inject-fault slow-ckpt@40 >"$d/run1.log" 2>&1 &
  pid=$!
  # Once a best was marked, kill during a later write.
  deadline=$((SECONDS + 60))
  until [ -f "$d/ck/best" ] && compgen -G "$d/ck/step-*.h5.tmp-*" >/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$d/run1.log"; false; }
    sleep 0.01
  done
  kill -KILL "$pid"
  wait "$pid" || true
  compgen -G "$d/ck/step-*.h5.tmp-*" >/dev/null  # killed mid-write
  run "$ST" ckpt verify "$d/ck/best"
  echo "$output"
  [ "$status" -eq 0 ]
  run --separate-stderr mpirun -n 2 "$ST" run "${OVERFIT[@]}" --train.epochs 60 --train.metrics "$d/m2.jsonl" \
    --ckpt.dir "$d/ck" --ckpt.every 10
  echo "$output" | grep -E "resumed|best|final"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck/step-"* ]]
  [[ $output == *"best test_loss so far "*" at step "*"($d/ck/best)"* ]]
  read -r step loss _ < <(best_of "$d/m1.jsonl" "$d/m2.jsonl")
  echo "lowest test loss of both runs $loss at step $step"
  [ "$(head -1 "$d/ck/best")" = "$(printf 'step-%08d.h5' "$step")" ]
  run "$ST" ckpt verify "$d/ck/best"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "keep_best: an unknown metric or one without ckpt.dir is refused before training, naming the value" {
  run "$ST" run "${OVERFIT[@]}" --ckpt.keep_best bleu --ckpt.dir "$BATS_TEST_TMPDIR/ck" --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"ckpt.keep_best = 'bleu': expected test_loss, test_accuracy or train_loss"* ]]
  run "$ST" run "${OVERFIT[@]}" --ckpt.keep_best test_loss:lowest --ckpt.dir "$BATS_TEST_TMPDIR/ck" --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"expected :min or :max after the metric's name"* ]]
  run "$ST" run "${OVERFIT[@]}" --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"ckpt.keep_best = 'test_loss' needs ckpt.dir"* ]]
}
