#!/usr/bin/env bats
# The GPT through the launcher on a local cluster: examples/gpt-tiny.sbatch on 2 ranks learns the
# fortunes corpus (validation loss well below its unigram entropy), `sample` writes text from its
# checkpoint, a preempted and requeued run ends with the parameters of an uninterrupted one, bit
# for bit, and a checkpoint of 2 ranks continues on 1. Shortened runs (a few hundred steps of a
# smaller batch); docs/models.md (gpt-tiny) has the full run's figures.

load helpers

setup_file() {
  [ -d /usr/share/games/fortunes ] || return 0
  export TOKENS=$BUILD/test/data/fortunes
  [ -f "$TOKENS/tokens.h5" ] || "$BUILD/bin/slurm-train" data import fortunes --out "$TOKENS" >/dev/null
  start_test_cluster --nodes 1
}

teardown_file() {
  stop_test_cluster
}

setup() {
  [ -d /usr/share/games/fortunes ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  # A folder laid out as the example expects: data/fortunes and examples/ beside each other.
  work=$BATS_TEST_TMPDIR/w
  mkdir -p "$work/data"
  ln -s "$TOKENS" "$work/data/fortunes"
  ln -s "$ROOT/examples" "$work/examples"
  TUNE=(--train.global_batch 16 --train.steps 200 --train.warmup_steps 20 --train.log_every 50 --train.metrics ""
    --run.progress lines)
}

@test "gpt-tiny on 2 ranks: validation loss well below the unigram entropy; sample continues a prompt in the corpus's bytes" {
  run bash -c "cd '$work' && srun --mpi=pmix -N1 -n2 '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml ${TUNE[*]} --ckpt.dir ck --ckpt.keep_best val_loss"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"training 842496 parameters on 2 rank(s), 200 steps"*"global batch 16 windows of 128 tokens"* ]]
  [[ $output =~ final:\ val_acc\ [0-9.]+%\ \ val_loss\ [0-9.]+\ \(([0-9.]+)\ bits/byte\) ]]
  bpb=${BASH_REMATCH[1]}
  [[ $output =~ unigram\ entropy\ ([0-9.]+)\) ]]
  unigram=${BASH_REMATCH[1]}
  echo "validation: $bpb bits per byte; unigram entropy $unigram"
  awk -v b="$bpb" -v u="$unigram" 'BEGIN { exit !(u > 4.5 && b < 0.8 * u) }'
  # The checkpoint in PyTorch, from the file alone (docs/models.md's mapping): the same validation
  # loss, and the same greedy continuation as ours.
  run $PY "$ROOT/examples/load_gpt_in_pytorch.py" "$work/ck/step-00000200.h5" --tokens "$TOKENS/tokens.h5" \
    --prompt "The " --bytes 80
  echo "$output"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} =~ validation\ loss\ ([0-9.]+)\ bits\ per\ byte ]]
  awk -v a="${BASH_REMATCH[1]}" -v b="$bpb" 'BEGIN { d = a - b; exit !(d < 2e-4 && d > -2e-4) }'
  torch_greedy=${output#*$'\n'}
  run "$BUILD/bin/slurm-train" sample "$work/ck" --prompt "The " --tokens 80 --temperature 0 --quiet --device cpu
  [ "$status" -eq 0 ]
  [ "$output" = "$torch_greedy" ]
  # The sampler: greedy is deterministic; drawn text is the corpus's kind of bytes (printable
  # ASCII and new lines, spaces between words).
  run "$BUILD/bin/slurm-train" sample "$work/ck" --prompt "The " --tokens 300 --seed 7 --quiet
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == "The "* ]]
  first=$output
  run "$BUILD/bin/slurm-train" sample "$work/ck/step-00000200.h5" --prompt "The " --tokens 300 --seed 7 --quiet
  [ "$output" = "$first" ]
  # The best checkpoint by name (ckpt.keep_best): the one its marker names.
  run "$BUILD/bin/slurm-train" sample "$work/ck/best" --prompt "The " --tokens 300 --seed 7 --quiet
  [ "$status" -eq 0 ]
  [ "$output" = "$(cd "$work/ck" && "$BUILD/bin/slurm-train" sample "$(head -1 best)" --prompt "The " --tokens 300 --seed 7 --quiet)" ]
  run $PY - "$first" <<'PYEOF'
import sys
text = sys.argv[1][4:].encode()
assert len(text) >= 290, len(text)
printable = sum(32 <= b < 127 or b == 10 for b in text) / len(text)
spaces = text.count(b" ") / len(text)
print(f"{len(text)} bytes: {printable:.1%} printable, {spaces:.1%} spaces")
assert printable > 0.95 and 0.05 < spaces < 0.35
PYEOF
  echo "$output"
  [ "$status" -eq 0 ]
  # What it refuses, before printing anything: bad option values (a usage error, exit 2), and a
  # top-k past this checkpoint's vocabulary.
  run "$BUILD/bin/slurm-train" sample "$work/ck" --temperature -1
  [ "$status" -eq 2 ]
  [[ $output == *"--temperature: -1: expected a finite number of at least 0"* ]]
  run "$BUILD/bin/slurm-train" sample "$work/ck" --seed -5
  [ "$status" -eq 2 ]
  [[ $output == *"--seed: -5: expected a whole number in [0, 18446744073709551615]"* ]]
  run "$BUILD/bin/slurm-train" sample "$work/ck" --tokens -1
  [ "$status" -eq 2 ]
  [[ $output == *"--tokens: -1: expected a whole number in [0, 2147483647]"* ]]
  run "$BUILD/bin/slurm-train" sample "$work/ck" --top-k 257
  [ "$status" -eq 1 ]
  [[ $output == *"top_k 257: expected 0 (every token) up to the vocabulary size 256"* ]]
  [[ $output != *"sampling"* ]]
  if [ ! -e /dev/nvidiactl ]; then  # a node without a GPU: --device cuda says why, auto falls back
    run "$BUILD/bin/slurm-train" sample "$work/ck" --device cuda
    [ "$status" -eq 1 ]
    [[ $output == *"sample --device cuda: no usable GPU: "* ]]
    run "$BUILD/bin/slurm-train" sample "$work/ck" --tokens 4
    [ "$status" -eq 0 ]
    [[ $output == *"on the CPU"* ]]
  fi
}

@test "gpt-tiny.sbatch preempted (--signal=USR2) and requeued resumes to the parameters of an uninterrupted run, bit for bit" {
  TUNE+=(--train.steps 100)
  (cd "$work" && srun --mpi=pmix -N1 -n2 "$BUILD/bin/slurm-train" run --config examples/gpt-tiny.toml "${TUNE[@]}" \
    --train.save "$work/uninterrupted.h5" >/dev/null)
  # The signal comes 30 to 60 s into each run (see launcher.bats' preemptible test); slow steps
  # make the training need longer than that.
  job=$(cd "$work" && PATH="$BUILD/bin:$PATH" sbatch --parsable --time=2 --signal=USR2@60 examples/gpt-tiny.sbatch \
    "${TUNE[@]}" --train.save "$work/preempted.h5" --log-dir "$work/logs" --inject-fault slow@600)
  run wait_job "$job" 600
  out=$(cat "$work/gpt-tiny-$job.out")
  echo "$out"
  [ "$output" = COMPLETED ]
  [[ $out == *"preempted (SIGUSR2 on "?" of 2 rank(s)): stopped after step "* ]]
  [[ $out == *"requeued job $job: it resumes from step"* ]]
  [[ $out == *"resumed from checkpoints/gpt-tiny-$job/step-"* ]]
  [[ $out == *"final: val_acc "*"%  val_loss "*" bits/byte)  after "* ]]
  run $PY "$ROOT/test/integration/compare_models.py" "$work/preempted.h5" "$work/uninterrupted.h5" 0
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"worst relative difference 0.000e+00"* ]]
}

@test "a gpt checkpoint of 2 ranks continues on 1, as the same global batches; --dry-run checks the token files" {
  (cd "$work" && srun --mpi=pmix -N1 -n2 "$BUILD/bin/slurm-train" run --config examples/gpt-tiny.toml "${TUNE[@]}" \
    --ckpt.dir ck --train.stop_after 100 >/dev/null)
  run bash -c "cd '$work' && srun --mpi=pmix -N1 -n1 '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml ${TUNE[*]} --ckpt.dir ck --train.save one.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from ck/step-00000100.h5 at step 100 (epoch 0, batch 100 of the epoch; written by 2 rank(s))"* ]]
  [[ $output =~ final:\ val_acc\ [0-9.]+%\ \ val_loss\ [0-9.]+\ \(([0-9.]+)\ bits/byte\) ]]
  one=${BASH_REMATCH[1]}
  run bash -c "cd '$work' && srun --mpi=pmix -N1 -n2 '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml ${TUNE[*]} --train.save two.h5"
  [ "$status" -eq 0 ]
  [[ $output =~ final:\ val_acc\ [0-9.]+%\ \ val_loss\ [0-9.]+\ \(([0-9.]+)\ bits/byte\) ]]
  two=${BASH_REMATCH[1]}
  echo "validation bits per byte: $one (2 ranks, then 1) and $two (2 ranks)"
  awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }'
  # One rank sums the 16 windows' gradients in another order than two: close, not identical. The
  # loosest tensor is the attention's key bias, whose true gradient is zero (softmax ignores a
  # constant per query): AdamW turns its rounding noise into steps of about lr.
  run $PY "$ROOT/test/integration/compare_models.py" "$work/one.h5" "$work/two.h5" 2e-2
  echo "$output"
  [ "$status" -eq 0 ]
  run bash -c "cd '$work' && '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml --dry-run"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"data/fortunes/tokens.h5: "*" training tokens, "*" windows of 128"* ]]
  [[ $output == *"842496 parameters"* ]]
  # A file that is not a token dataset, and a shape that cannot be.
  run bash -c "cd '$work' && '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml --data.train ck/step-00000100.h5 --dry-run"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"ck/step-00000100.h5: has no dataset /tokens; expected a token dataset written by \`slurm-train data import text\`"* ]]
  run bash -c "cd '$work' && '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml --model.embd 130 --dry-run"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"model.embd = 130: expected a multiple of model.heads = 4"* ]]
}

@test "gpt with train.shard_optimizer on 2 and 3 ranks: the replicated run's parameters, bit for bit; the ranks' checkpoint verifies" {
  small="--train.global_batch 16 --train.steps 30 --train.warmup_steps 5 --train.metrics= --run.progress lines"
  small+=" --model.layers 2 --model.embd 64 --train.eval_batch 64"
  for n in 2 3; do
    for mode in false true; do
      ckpt="--ckpt.dir="
      [ "$mode" = true ] && ckpt="--ckpt.dir sharded-ck-$n"
      run bash -c "cd '$work' && srun --mpi=pmix -N1 -n$n '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml \
        $small $ckpt --train.shard_optimizer $mode --train.save sharded-$mode-$n.h5"
      [ "$status" -eq 0 ]
    done
    [[ $output == *"the optimizer state is sharded over $n ranks: 0.50 MiB on rank 0 (0.95 MiB whole)"* ]]
    [[ $output == *"checkpoint step 30 -> sharded-ck-$n/step-00000030.h5 (written by the $n ranks together"* ]]
    run h5diff "$work/sharded-false-$n.h5" "$work/sharded-true-$n.h5" /model /model
    [ "$status" -eq 0 ]
    run "$BUILD/bin/slurm-train" ckpt verify "$work/sharded-ck-$n/step-00000030.h5"
    echo "$output"
    [ "$status" -eq 0 ]
    run $PY "$ROOT/test/integration/compare_models.py" "$work/sharded-ck-$n/step-00000030.h5" "$work/sharded-true-$n.h5" 0
    echo "$output"
    [ "$status" -eq 0 ]
  done
}

@test "gpt on 2 GPUs with train.shard_optimizer (NCCL): the replicated run's parameters, bit for bit; the ranks' checkpoint verifies" {
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "${gpus:-0}" -ge 2 ] || skip "needs 2 GPUs on this node for 2 NCCL ranks (NCCL refuses two ranks on one GPU); ${gpus:-0} here"
  small="--train.global_batch 16 --train.steps 30 --train.warmup_steps 5 --train.metrics= --run.progress lines"
  small+=" --train.eval_batch 64 --train.device cuda --train.deterministic true --train.bucket_mb 0.05"
  # fp32 and bf16 over many buckets (some within one rank's shard); SGD on a model of one norm
  # block, which leaves rank 1's shard empty.
  for shape in "fp32 --model.layers 2 --model.embd 64" "bf16 --model.layers 2 --model.embd 64" \
    "fp32 --model.layers 1 --model.embd 16 --model.heads 2 --train.optimizer sgd"; do
    set -- $shape
    name="$1-$3-$5"
    precision=$1
    shift
    for mode in false true; do
      ckpt="--ckpt.dir="
      [ "$mode" = true ] && ckpt="--ckpt.dir gpu-ck-$name"
      run bash -c "cd '$work' && srun --mpi=pmix -N1 -n2 '$BUILD/bin/slurm-train' run --config examples/gpt-tiny.toml \
        $small --train.precision $precision $* $ckpt --train.shard_optimizer $mode --train.save gpu-$mode-$name.h5"
      echo "$output"
      [ "$status" -eq 0 ]
    done
    [[ $output == *"the optimizer state is sharded over 2 ranks"* ]]
    [[ $output == *"checkpoint step 30 -> gpu-ck-$name/step-00000030.h5 (written by the 2 ranks together"* ]]
    run h5diff "$work/gpu-false-$name.h5" "$work/gpu-true-$name.h5" /model /model
    echo "$output"
    [ "$status" -eq 0 ]
    run "$BUILD/bin/slurm-train" ckpt verify "$work/gpu-ck-$name/step-00000030.h5"
    echo "$output"
    [ "$status" -eq 0 ]
  done
}
