#!/usr/bin/env bats
# The CPU engine without Slurm: data import, the HDF5 reader's errors, configuration errors,
# and data-parallel training as one process and under mpirun (rank equivalence, determinism).

load helpers

setup_file() {
  ensure_fashion_mnist
}

# A small, quick variant of the reference configuration.
small_run() {
  "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" \
    --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" \
    --model.hidden "[64, 32]" --train.metrics "" --train.eval_batch 2000 "$@"
}

@test "data import fashion-mnist writes train.h5 and test.h5 with shapes and class names" {
  run "$BUILD/bin/slurm-train" data import fashion-mnist --out "$BATS_TEST_TMPDIR/fm"
  [ "$status" -eq 0 ]
  [[ $output == *"train.h5 (60000 samples)"* ]]
  [[ $output == *"test.h5 (10000 samples)"* ]]
  run h5ls "$BATS_TEST_TMPDIR/fm/train.h5"
  [[ $output == *"images"*"Dataset {60000, 28, 28}"* ]]
  [[ $output == *"labels"*"Dataset {60000}"* ]]
  run h5dump -a /class_names "$BATS_TEST_TMPDIR/fm/test.h5"
  [[ $output == *'"T-shirt/top"'* && $output == *'"Ankle boot"'* ]]
  # Stored contiguous and uncompressed: a run reads the images straight, without decoding them.
  run h5dump -p -H -d /images "$BATS_TEST_TMPDIR/fm/test.h5"
  [[ $output == *"CONTIGUOUS"* ]]
  [[ $output != *"COMPRESSION"* ]]
}

@test "data import idx converts any IDX pair, plain or gzip" {
  src=/usr/share/datasets/fashion-mnist
  gunzip -c "$src/t10k-labels-idx1-ubyte.gz" >"$BATS_TEST_TMPDIR/labels.idx"
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$BATS_TEST_TMPDIR/labels.idx" \
    --out "$BATS_TEST_TMPDIR/t.h5"
  [ "$status" -eq 0 ]
  run $PY -c "import h5py; f = h5py.File('$BATS_TEST_TMPDIR/t.h5'); print(f['images'].shape, f['images'].dtype, f['labels'][:5].tolist())"
  [ "$output" = "(10000, 28, 28) uint8 [9, 2, 1, 1, 6]" ]
}

@test "a corrupt or mismatched IDX file is refused with the file named, and nothing is written" {
  src=/usr/share/datasets/fashion-mnist
  gunzip -c "$src/t10k-images-idx3-ubyte.gz" | head -c 5000 >"$BATS_TEST_TMPDIR/short.idx"
  run "$BUILD/bin/slurm-train" data import idx "$BATS_TEST_TMPDIR/short.idx" "$src/t10k-labels-idx1-ubyte.gz" --out "$BATS_TEST_TMPDIR/x.h5"
  [ "$status" -eq 1 ]
  [[ $output == *"IDX file '$BATS_TEST_TMPDIR/short.idx'"*"promises 7840000"*"truncated or corrupt"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/x.h5" ]
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" --out "$BATS_TEST_TMPDIR/x.h5"
  [ "$status" -eq 1 ]
  [[ $output == *"has 10000 images but"*"train-labels-idx1-ubyte.gz' has 60000 labels"* ]]
  head -c 3000 "$src/t10k-labels-idx1-ubyte.gz" >"$BATS_TEST_TMPDIR/cut.gz"
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$BATS_TEST_TMPDIR/cut.gz" --out "$BATS_TEST_TMPDIR/x.h5"
  [ "$status" -eq 1 ]
  [[ $output == *"cut.gz"* ]]
  run "$BUILD/bin/slurm-train" data import fashion-mnist --from "$BATS_TEST_TMPDIR/nowhere" --out "$BATS_TEST_TMPDIR/fm"
  [ "$status" -eq 1 ]
  [[ $output == *"'$BATS_TEST_TMPDIR/nowhere' is not a folder (install the Debian package dataset-fashion-mnist"* ]]
  mkdir "$BATS_TEST_TMPDIR/half"
  cp "$src"/train-* "$BATS_TEST_TMPDIR/half/"
  run "$BUILD/bin/slurm-train" data import fashion-mnist --from "$BATS_TEST_TMPDIR/half" --out "$BATS_TEST_TMPDIR/fm"
  [ "$status" -eq 1 ]
  [[ $output == *"no 't10k-images-idx3-ubyte' or 't10k-images-idx3-ubyte.gz' in '$BATS_TEST_TMPDIR/half'"* ]]
}

@test "a missing dataset, a missing file or a label outside the classes names the file and dataset" {
  # The first two are found before training starts: configuration errors (exit 2).
  run small_run --train.steps 1 --data.features /pixels
  [ "$status" -eq 2 ]
  [[ $output == *"HDF5 file '$TEST_DATA/train.h5' has no dataset '/pixels'"* ]]
  run small_run --train.steps 1 --data.train "$BATS_TEST_TMPDIR/none.h5"
  [ "$status" -eq 2 ]
  [[ $output == *"cannot open HDF5 file '$BATS_TEST_TMPDIR/none.h5'"* ]]
  run small_run --train.steps 1 --data.num_classes 5
  [ "$status" -eq 1 ]
  [[ $output == *"$TEST_DATA/train.h5:/labels: label "*" is outside [0, 5) (data.num_classes)"* ]]
}

@test "configuration errors: unknown keys suggest the nearest, bad values say what is expected" {
  printf '[train]\nepochs = 2\nlearning_rate = 0.1\n' >"$BATS_TEST_TMPDIR/bad.toml"
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/bad.toml"
  [ "$status" -ne 0 ]
  [[ $output == *"bad.toml:3:1: unknown key 'train.learning_rate' (did you mean 'train.lr'?)"* ]]
  run small_run --train.max_steps 5
  [ "$status" -eq 2 ]
  [[ $output == *"unknown option '--train.max_steps' (did you mean '--train.steps'?)"* ]]
  run small_run --train.stpes 5
  [ "$status" -eq 2 ]
  [[ $output == *"unknown option '--train.stpes' (did you mean '--train.steps'?)"* ]]
  run small_run --model.activation tanh --train.lr -1
  [ "$status" -ne 0 ]
  [[ $output == *"model.activation = 'tanh': expected one of: relu, gelu"* ]]
  [[ $output == *"train.lr = -1: expected a number in (0, 10]"* ]]
  printf '[train]\nepochs = "many"\n' >"$BATS_TEST_TMPDIR/type.toml"
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/type.toml"
  [[ $output == *"type.toml:2:10: train.epochs: expected a whole number"* ]]
  printf '[train\n' >"$BATS_TEST_TMPDIR/syntax.toml"
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/syntax.toml"
  [ "$status" -ne 0 ]
  [[ $output == *"syntax.toml:1:"* ]]
}

@test "--print-config shows every value and where it came from" {
  SLURM_TRAIN_TRAIN_SEED=11 SLURM_TRAIN_TRAIN_LR=0.9 run small_run --print-config --train.lr 0.005
  [[ $output == *"train.seed"*"= 11"*"# environment SLURM_TRAIN_TRAIN_SEED"* ]]
  [ "$status" -eq 0 ]
  [[ $output == *"train.lr"*"= 0.005"*"# command line"* ]]
  [[ $output == *"train.epochs"*"= 15"*"# $ROOT/examples/fashion-mnist.toml"* ]]
  [[ $output == *"train.eval_batch"*"# command line"* ]]
  [[ $output == *"train.bucket_mb"*"# default"* ]]
  # The launcher's own settings too, with theirs.
  SLURM_TRAIN_LOG_DIR=/tmp/x run small_run --print-config --hang-timeout 30 --no-resume
  [ "$status" -eq 0 ]
  [[ $output == *"run.log_dir"*"= '/tmp/x'"*"# environment SLURM_TRAIN_LOG_DIR"* ]]
  [[ $output == *"run.hang_timeout"*"= 30"*"# command line"* ]]
  [[ $output == *"ckpt.resume"*"= false"*"# command line"* ]]
  [[ $output == *"run.preempt_signal"*"= 'USR2,TERM'"*"# default"* ]]
}

@test "train.device: an unknown value is refused; auto says in one line where it trains; cuda fails here, and on a login node says how to submit" {
  run small_run --train.steps 2 --train.device gpu
  [ "$status" -ne 0 ]
  [[ $output == *"train.device = 'gpu': expected one of: auto, cpu, cuda"* ]]
  run --separate-stderr small_run --train.steps 2 --train.device auto
  [ "$status" -eq 0 ]
  [ "$(grep -c 'training on the CPU' <<<"$stderr")" -eq 1 ]
  # Outside any allocation or launcher (a login node): how to submit, instead of training here.
  run env -u SLURM_JOB_ID "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" \
    --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" --train.steps 2 --train.device cuda
  [ "$status" -eq 2 ]
  [[ $output == *"this looks like a login node"*"slurm-train submit $ROOT/examples/fashion-mnist.toml --nodes 1 --gpus-per-node 1"* ]]
  # Under a launcher, without a GPU: never silently the CPU; a configuration error (exit 2),
  # found before MPI starts.
  run mpirun -n 1 "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" \
    --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" --train.steps 2 --train.device cuda
  [ "$status" -eq 2 ]
  [[ $output == *"train.device = cuda, but there is no usable GPU: "* ]]
  run --separate-stderr small_run --train.steps 2 --train.device cpu
  [ "$status" -eq 0 ]
  [[ $stderr != *"training on the CPU"* ]]
}

@test "one process trains, evaluates, writes per-step metrics and the final model" {
  run small_run --train.steps 30 --train.metrics "$BATS_TEST_TMPDIR/m.jsonl" --train.save "$BATS_TEST_TMPDIR/model.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"on 1 rank(s), 30 steps"* ]]
  [[ $output =~ epoch\ +1\ +step\ +30\ +train_loss\ [0-9.]+\ +test_loss\ [0-9.]+\ +test_acc\ [0-9.]+%\ +samples/s\ [0-9]+ ]]
  [ "$(wc -l <"$BATS_TEST_TMPDIR/m.jsonl")" -eq 31 ]
  run $PY -c "
import json
lines = [json.loads(l) for l in open('$BATS_TEST_TMPDIR/m.jsonl')]
rows = [r for r in lines if 'step' in r]
evals = [r['eval'] for r in lines if 'eval' in r]
assert len(evals) == 1 and evals[0]['step'] == 30 and 0 < evals[0]['test_accuracy'] < 1, evals
assert [r['step'] for r in rows] == list(range(30))
assert all(set(r['time_s']) == {'data', 'forward', 'backward', 'comm_wait', 'optimizer', 'checkpoint'} for r in rows)
assert rows[-1]['loss'] < rows[0]['loss'], (rows[0]['loss'], rows[-1]['loss'])
print('ok')"
  [ "$output" = ok ]
  run h5ls -r "$BATS_TEST_TMPDIR/model.h5"
  [[ $output == *"/model/layer1.weight"*"Dataset {64, 784}"* ]]
  [[ $output == *"/model/layer3.bias"*"Dataset {10}"* ]]
}

@test "the same seed and world size give bit-identical parameters" {
  small_run --train.steps 20 --train.save "$BATS_TEST_TMPDIR/a.h5" >/dev/null
  small_run --train.steps 20 --train.save "$BATS_TEST_TMPDIR/b.h5" >/dev/null
  run h5diff "$BATS_TEST_TMPDIR/a.h5" "$BATS_TEST_TMPDIR/b.h5" /model /model
  [ "$status" -eq 0 ]
  small_run --train.steps 20 --train.seed 7 --train.save "$BATS_TEST_TMPDIR/c.h5" >/dev/null
  run h5diff -q "$BATS_TEST_TMPDIR/a.h5" "$BATS_TEST_TMPDIR/c.h5" /model /model
  [ "$status" -eq 1 ]
}

@test "one process started without an MPI launcher trains without MPI (Open MPI hidden), as mpirun -n 1 trains it" {
  # A GPU node may have no MPI installation at all: a world of one needs none.
  unshare --mount true 2>/dev/null || skip "unshare --mount is not permitted here (needed to hide Open MPI)"
  small_run --train.steps 20 --train.save "$BATS_TEST_TMPDIR/mpi.h5" >/dev/null
  hidden=$BATS_TEST_TMPDIR/hidden
  mkdir -p "$hidden"
  run unshare --mount bash -c "mount --bind '$hidden' /usr/lib/x86_64-linux-gnu/openmpi &&
    mount --bind /dev/null /usr/bin/orted &&
    ! ls /usr/lib/x86_64-linux-gnu/openmpi/lib >/dev/null 2>&1 &&
    exec '$BUILD/bin/slurm-train' run --config '$ROOT/examples/fashion-mnist.toml' \
      --data.train '$TEST_DATA/train.h5' --data.test '$TEST_DATA/test.h5' --model.hidden '[64, 32]' \
      --train.metrics '' --train.eval_batch 2000 --train.steps 20 --train.save '$BATS_TEST_TMPDIR/alone.h5'"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"start-up: one process without MPI"* ]]
  run h5diff "$BATS_TEST_TMPDIR/mpi.h5" "$BATS_TEST_TMPDIR/alone.h5" /model /model
  [ "$status" -eq 0 ]
  # Under mpirun the same run is an MPI rank (Open MPI visible again). Not bound to one core, so
  # that OpenBLAS runs as many threads as above: the same sums in the same order.
  run mpirun -n 1 --bind-to none "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" \
    --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" --model.hidden "[64, 32]" \
    --train.metrics "" --train.eval_batch 2000 --train.steps 20 --train.save "$BATS_TEST_TMPDIR/mpirun.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"start-up: MPI "* ]]
  run h5diff "$BATS_TEST_TMPDIR/mpi.h5" "$BATS_TEST_TMPDIR/mpirun.h5" /model /model
  [ "$status" -eq 0 ]
}

@test "mpirun on 2 and 4 ranks matches 1 rank after 50 steps (1e-5), with a batch 4 ranks do not divide" {
  # Global batch 250: on 4 ranks the split is exact (63, 63, 62, 62 rows).
  small_run --train.steps 50 --train.global_batch 250 --train.save "$BATS_TEST_TMPDIR/one.h5" >/dev/null
  for n in 2 4; do
    run mpirun -n "$n" --oversubscribe --bind-to none "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" \
      --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5" --model.hidden "[64, 32]" \
      --train.metrics "" --train.eval_batch 2000 --train.steps 50 --train.global_batch 250 \
      --train.save "$BATS_TEST_TMPDIR/n$n.h5"
    [ "$status" -eq 0 ]
    [[ $output == *"on $n rank(s)"* ]]
    run $PY "$ROOT/test/integration/compare_models.py" "$BATS_TEST_TMPDIR/n$n.h5" "$BATS_TEST_TMPDIR/one.h5" 1e-5
    echo "$n ranks: $output"
    [ "$status" -eq 0 ]
  done
}

@test "train.shard_optimizer: the same parameters as the replicated run (bit for bit on 2 ranks), 1/N of the optimizer state per rank" {
  args=(run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5"
    --model.hidden "[256, 128]" --train.metrics "" --train.eval_batch 2000 --train.steps 40)
  for n in 2 4; do
    mpirun -n "$n" --oversubscribe --bind-to none "$BUILD/bin/slurm-train" "${args[@]}" \
      --train.save "$BATS_TEST_TMPDIR/replicated$n.h5" >/dev/null
    run mpirun -n "$n" --oversubscribe --bind-to none "$BUILD/bin/slurm-train" "${args[@]}" \
      --train.shard_optimizer true --train.save "$BATS_TEST_TMPDIR/sharded$n.h5"
    echo "$output"
    [ "$status" -eq 0 ]
    # AdamW's two moments of 235146 parameters: 1.79 MiB whole; rank 0's shard of whole 32768-element blocks.
    [[ $output == *"the optimizer state is sharded over $n ranks: "*" MiB on rank 0 (1.79 MiB whole)"* ]]
    shard=$(sed -n 's/.*sharded over [0-9]* ranks: \([0-9.]*\) MiB on rank 0.*/\1/p' <<<"$output")
    awk -v s="$shard" -v n="$n" 'BEGIN { exit !(s <= 1.79 / n + 0.25 + 1e-9) }'
  done
  # Two ranks: every gradient element is one addition, whichever collective adds it.
  run h5diff "$BATS_TEST_TMPDIR/replicated2.h5" "$BATS_TEST_TMPDIR/sharded2.h5" /model /model
  [ "$status" -eq 0 ]
  # Four: Open MPI's all-reduce and reduce-scatter may associate the sums differently.
  run $PY "$ROOT/test/integration/compare_models.py" "$BATS_TEST_TMPDIR/sharded4.h5" "$BATS_TEST_TMPDIR/replicated4.h5" 1e-5
  echo "4 ranks: $output"
  [ "$status" -eq 0 ]
}

@test "train.shard_optimizer: a checkpoint of 4 sharded ranks verifies, resumes bit for bit on 4 and continues on 2 and 3" {
  args=(run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5"
    --model.hidden "[256, 128]" --train.metrics "" --train.eval_batch 2000 --train.steps 40 --train.shard_optimizer true)
  sharded() {
    local n=$1
    shift
    mpirun -n "$n" --oversubscribe --bind-to none "$BUILD/bin/slurm-train" "${args[@]}" "$@"
  }
  d=$BATS_TEST_TMPDIR
  run sharded 4 --train.stop_after 20 --ckpt.dir "$d/ck"
  [ "$status" -eq 0 ]
  [[ $output == *"checkpoint step 20 -> $d/ck/step-00000020.h5 (written by the 4 ranks together"* ]]
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck/step-00000020.h5"
  [ "$status" -eq 0 ]
  # Every rank wrote its part of each tensor and checksummed it; a damaged part is named by its rank.
  run $PY - "$d/ck/step-00000020.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    w = f["/optimizer/exp_avg/layer1.weight"]
    print(list(w.attrs["shard_rank"]), list(w.attrs["shard_first"]), w.id.get_offset())
PY
  echo "$output"
  [[ $output == "[0, 1, 2, 3] [0, "* ]]
  read -r offset < <(echo "$output" | awk '{ print $NF }')
  first3=$(echo "$output" | tr -d '[],' | awk '{ print $8 }')
  cp "$d/ck/step-00000020.h5" "$d/damaged.h5"
  printf '\x55' | dd of="$d/damaged.h5" bs=1 seek=$((offset + 4 * first3 + 2)) conv=notrunc status=none
  run "$BUILD/bin/slurm-train" ckpt verify "$d/damaged.h5"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"/optimizer/exp_avg/layer1.weight: part 4 of 4 ("*"written by rank 3) fails its checksum"* ]]
  for n in 2 3; do
    mkdir "$d/ck$n"
    cp "$d/ck/step-00000020.h5" "$d/ck$n/"
  done
  for n in 4 2 3; do
    folder=$d/ck$n
    [ "$n" = 4 ] && folder=$d/ck
    run sharded "$n" --ckpt.dir "$folder" --train.save "$d/resumed$n.h5"
    [ "$status" -eq 0 ]
    [[ $output == *"resumed from $folder/step-00000020.h5 at step 20"*"written by 4 rank(s)"* ]]
    sharded "$n" --train.save "$d/whole$n.h5" >/dev/null
  done
  run h5diff "$d/whole4.h5" "$d/resumed4.h5" /model /model
  [ "$status" -eq 0 ]
  for n in 2 3; do
    run $PY "$ROOT/test/integration/compare_models.py" "$d/resumed$n.h5" "$d/whole$n.h5" 1e-5
    echo "$n ranks: $output"
    [ "$status" -eq 0 ]
  done
}

@test "train.shard_optimizer: the ranks' checkpoint holds the replicated run's checkpoint bit for bit, on 2 ranks" {
  args=(run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5" --data.test "$TEST_DATA/test.h5"
    --model.hidden "[256, 128]" --train.metrics "" --train.eval_batch 2000 --train.steps 40 --train.stop_after 12)
  d=$BATS_TEST_TMPDIR
  for mode in true false; do
    mpirun -n 2 --oversubscribe --bind-to none "$BUILD/bin/slurm-train" "${args[@]}" --train.shard_optimizer $mode \
      --ckpt.dir "$d/$mode" >/dev/null
  done
  run $PY - "$d/true/step-00000012.h5" "$d/false/step-00000012.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    names = []
    a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
    other = []
    b.visit(lambda n: other.append(n) if isinstance(b[n], h5py.Dataset) else None)
    assert names == other, (names, other)
    for n in names:
        if n == "train/epoch_seconds":  # a measured time
            continue
        x, y = a[n][()], b[n][()]
        assert np.asarray(x).dtype == np.asarray(y).dtype and np.asarray(x).tobytes() == np.asarray(y).tobytes(), n
        assert a[n].attrs["crc32"] == b[n].attrs["crc32"], n
    parts = sum(1 for n in names if "shard_crc32" in a[n].attrs)
    print(f"{len(names)} datasets equal, {parts} written in parts")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"datasets equal, 18 written in parts" ]]
}

@test "train.shard_optimizer is refused with the reference kernels and for an MLP on a GPU, naming the keys" {
  run small_run --train.steps 2 --train.shard_optimizer true --train.kernels reference
  [ "$status" -eq 2 ]
  [[ $output == *"train.shard_optimizer = true needs train.kernels = cpu"* ]]
  run small_run --train.steps 2 --train.shard_optimizer true --train.device cuda
  [ "$status" -eq 2 ]
  [[ $output == *"train.shard_optimizer = true with train.device = cuda: on a GPU the optimizer is sharded for model.kind = \"gpt\" only so far, and model.kind = \"mlp\""* ]]
}

@test "a global batch smaller than the world size is refused, naming both" {
  run mpirun -n 4 --oversubscribe "$BUILD/bin/slurm-train" run --data.train "$TEST_DATA/train.h5" \
    --data.test "$TEST_DATA/test.h5" --model.hidden "[8]" --train.global_batch 3 --train.steps 1
  [ "$status" -ne 0 ]
  [[ $output == *"train.global_batch = 3 is smaller than the 4 ranks"* ]]
}

@test "train.prometheus writes a textfile-collector file that Prometheus' own parser reads" {
  SLURM_JOB_ID=4242 SLURM_JOB_NAME='fm "quoted"' run small_run --train.steps 25 --train.prometheus_every 10 \
    --train.prometheus "$BATS_TEST_TMPDIR/train.prom"
  [ "$status" -eq 0 ]
  [ -z "$(ls "$BATS_TEST_TMPDIR" | grep -F train.prom.tmp)" ]
  run $PY -c "
from prometheus_client.parser import text_string_to_metric_families
samples = {s.name: s for f in text_string_to_metric_families(open('$BATS_TEST_TMPDIR/train.prom').read()) for s in f.samples}
assert samples['slurm_train_step'].value == 25, samples['slurm_train_step']
assert samples['slurm_train_steps_total'].value == 25
assert samples['slurm_train_step'].labels == {'job_id': '4242', 'job_name': 'fm \"quoted\"'}, samples['slurm_train_step'].labels
assert 0 < samples['slurm_train_test_accuracy'].value < 1
assert samples['slurm_train_samples_per_second'].value > 0
print('ok')"
  echo "$output"
  [ "$output" = ok ]
}

@test "run --dry-run checks the configuration and its files without training" {
  run small_run --dry-run --train.save "$BATS_TEST_TMPDIR/m.h5" --ckpt.dir "$BATS_TEST_TMPDIR/ckpt"
  [ "$status" -eq 0 ]
  [[ $output == *"OK    checkpoints  '$BATS_TEST_TMPDIR' is writable"* ]]
  [[ $output == *"OK    train data   $TEST_DATA/train.h5: 60000 samples of 784 features, 10 classes"* ]]
  [[ $output == *"OK    output       '$BATS_TEST_TMPDIR' is writable"* ]]
  [[ $output == *"dry run: ready to train"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/m.h5" ]
  run small_run --dry-run --data.test /missing.h5 --train.global_batch 70000 --train.save /proc/m.h5
  [ "$status" -eq 2 ]
  [[ $output == *"FAIL  test data    cannot open HDF5 file '/missing.h5'"* ]]
  [[ $output == *"FAIL  data         train.global_batch = 70000 is larger than the 60000 samples"* ]]
  [[ $output == *"FAIL  output       '/proc' is not writable"* ]]
  [[ $output == *"dry run: problems found, nothing was trained"* ]]
  run small_run --dry-run --model.activation sigmoid
  [ "$status" -ne 0 ]
  [[ $output == *"model.activation = 'sigmoid': expected one of: relu, gelu"* ]]
}
