#!/usr/bin/env bats
# Hostile datasets and configuration values: each refused up front with one message naming the
# file, dataset or key, the value and what was expected; exit 2 for configuration errors, found
# before MPI starts and printed once however many ranks find them.

load helpers

setup_file() {
  ensure_fashion_mnist
}

setup() {
  set_small_args
}

# ASan reserves terabytes of address space: `ulimit -v` cannot be combined with it, so the
# sanitized build runs these without the limit (the checks then meet MemAvailable instead).
sanitized() {
  grep -qa __asan_init "$BUILD/bin/slurm-train"
}

# limited CMD...: CMD under `ulimit -v` of about 1.9 GiB, which a 2 GiB allocation breaks.
limited() {
  # One OpenBLAS thread: a worker thread that cannot allocate its buffer under the limit retries
  # for ever and hangs the exit (see checkpoint.bats); what is tested here uses no BLAS.
  if sanitized; then "$@"; else (ulimit -v 2000000 && OPENBLAS_NUM_THREADS=1 "$@"); fi
}

@test "a gzip bomb behind a small IDX header is refused once the header's bytes are read" {
  $PY - "$BATS_TEST_TMPDIR" <<'PY'
import gzip, struct, sys
d = sys.argv[1]
with gzip.open(d + '/bomb.gz', 'wb', compresslevel=9) as f:  # 2 MB that inflate to 2.1 GB
    f.write(struct.pack('>BBBBIII', 0, 0, 8, 3, 10, 28, 28))
    zeros = bytes(1 << 24)
    for _ in range(128):
        f.write(zeros)
with gzip.open(d + '/huge.gz', 'wb') as f:  # a header promising 4 TiB
    f.write(struct.pack('>BBBBIII', 0, 0, 8, 3, 65536, 65536, 1024) + bytes(100))
with open(d + '/labels.idx', 'wb') as f:
    f.write(struct.pack('>BBBBI', 0, 0, 8, 1, 10) + bytes(range(10)))
PY
  run limited "$BUILD/bin/slurm-train" data import idx "$BATS_TEST_TMPDIR/bomb.gz" "$BATS_TEST_TMPDIR/labels.idx" \
    --out "$BATS_TEST_TMPDIR/x.h5"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"IDX file '$BATS_TEST_TMPDIR/bomb.gz': holds more data than the 7840 bytes its header promises"* ]]
  run limited "$BUILD/bin/slurm-train" data import idx "$BATS_TEST_TMPDIR/huge.gz" "$BATS_TEST_TMPDIR/labels.idx" \
    --out "$BATS_TEST_TMPDIR/x.h5"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"IDX file '$BATS_TEST_TMPDIR/huge.gz' needs 4.0 TiB (its header promises [65536, 65536, 1024] unsigned bytes), but only "*" can be allocated here (MemAvailable "* ]]
  [ -z "$(ls "$BATS_TEST_TMPDIR" | grep -e x.h5)" ]
}

@test "data import into an existing folder is refused before anything is read, and leaves no .tmp" {
  src=/usr/share/datasets/fashion-mnist
  mkdir "$BATS_TEST_TMPDIR/out"
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" \
    --out "$BATS_TEST_TMPDIR/out"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"--out '$BATS_TEST_TMPDIR/out' is a folder (expected the path of the HDF5 file to write)"* ]]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR" | grep -v -x -e out)" ]
  # An existing file is replaced whole.
  echo old >"$BATS_TEST_TMPDIR/t.h5"
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" \
    --out "$BATS_TEST_TMPDIR/t.h5"
  [ "$status" -eq 0 ]
  h5ls "$BATS_TEST_TMPDIR/t.h5" | grep -q "Dataset {10000, 28, 28}"
  [ -z "$(ls "$BATS_TEST_TMPDIR" | grep -F t.h5.tmp)" ]
  # A failed import removes its temporary file.
  run "$BUILD/bin/slurm-train" data import idx "$src/t10k-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" \
    --out "$BATS_TEST_TMPDIR/u.h5"
  [ "$status" -eq 1 ]
  [ -z "$(ls "$BATS_TEST_TMPDIR" | grep -e '^u.h5')" ]
}

@test "a dataset or a model too big for memory is refused before it is allocated, in the run and in --dry-run (exit 2)" {
  # [2^20, 2^20] float32 features (4 TiB), chunked and never written: a file of a few KiB.
  $PY -c "
import h5py, numpy as np
with h5py.File('$BATS_TEST_TMPDIR/big.h5', 'w') as f:
    f.create_dataset('images', shape=(1 << 20, 1 << 20), dtype='f4', chunks=(1, 1024))
    f.create_dataset('labels', data=np.zeros(1 << 20, dtype='u1'))
"
  for mode in --dry-run --train.steps=1; do
    run limited "$BUILD/bin/slurm-train" run "${SMALL[@]}" --data.train "$BATS_TEST_TMPDIR/big.h5" "$mode"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ $output == *"$BATS_TEST_TMPDIR/big.h5:/images needs 4.0 TiB (float32 of [1048576, 1048576]), but only "*" can be allocated here"* ]]
    [[ $output != *"bad_alloc"* ]]
  done
  # 4.3 billion parameters: 65 GiB to train.
  for mode in --dry-run --train.steps=1; do
    run limited "$BUILD/bin/slurm-train" run "${SMALL[@]}" --model.hidden "[65536, 65536]" "$mode"
    echo "$output"
    if sanitized && [ "$(awk '/MemAvailable/ { print $2 }' /proc/meminfo)" -gt 70000000 ]; then
      skip "sanitized build (no ulimit -v) on a machine with more than 66 GiB available"
    fi
    [ "$status" -eq 2 ]
    [[ $output == *"model.hidden = [65536, 65536] needs "*" (4347133962 parameters x 4 float32 copies"*"), but only "* ]]
  done
  # What fits still runs under the limit.
  run limited "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"OK    model        "*" parameters, "*" to train"* ]]
}

@test "a non-finite feature is refused at load, naming the file, dataset and first bad sample" {
  $PY -c "
import h5py, numpy as np
x = np.random.default_rng(0).random((500, 20), dtype=np.float32)
x[123, 7] = np.nan
with h5py.File('$BATS_TEST_TMPDIR/nan.h5', 'w') as f:
    f['images'] = x
    f['labels'] = np.arange(500, dtype=np.int32) % 10
"
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --data.train "$BATS_TEST_TMPDIR/nan.h5" \
    --data.test "$BATS_TEST_TMPDIR/nan.h5" --dry-run
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL  train data   $BATS_TEST_TMPDIR/nan.h5:/images: feature 7 of sample 123 is nan (expected finite numbers"* ]]
  [[ $output == *"dry run: problems found, nothing was trained"* ]]
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --data.train "$BATS_TEST_TMPDIR/nan.h5" \
    --data.test "$BATS_TEST_TMPDIR/nan.h5" --train.steps 2
  [ "$status" -ne 0 ]
  [[ $output == *"$BATS_TEST_TMPDIR/nan.h5:/images: feature 7 of sample 123 is nan"* ]]
}

@test "non-finite and out-of-range configuration values are refused with exit 2, naming key and value" {
  printf '[model]\nhidden = [4294967312]\n' >"$BATS_TEST_TMPDIR/wide.toml"
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/wide.toml" --print-config
  [ "$status" -eq 2 ]
  [[ $output == *"wide.toml:2:10: model.hidden = 4294967312: expected a whole number in [-2147483648, 2147483647]"* ]]
  printf '[train]\nepochs = 4294967297\nweight_decay = inf\n' >"$BATS_TEST_TMPDIR/epochs.toml"
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/epochs.toml" --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"train.epochs = 4294967297: expected a whole number in [-2147483648, 2147483647]"* ]]
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --train.lr 1e30
  [ "$status" -eq 2 ]
  [[ $output == *"train.lr = 1e+30: expected a number in (0, 10]"* ]]
  for kv in train.weight_decay=inf train.eps=inf train.lr=nan model.dropout=nan train.clip_norm=-inf; do
    run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 "--$kv"
    [ "$status" -eq 2 ]
    [[ $output == *"${kv%%=*} = '${kv#*=}': expected a finite number"* ]]
  done
  SLURM_TRAIN_TRAIN_EPS=inf run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run
  [ "$status" -eq 2 ]
  [[ $output == *"train.eps = 'inf': expected a finite number"* ]]
}

@test "a TOML file that would abort the TOML parser (a control character, a table header without a name, UTF-8 outside strings) is refused with its place, exit 2" {
  printf '[train]\nlr = 0.1\n[#x]\n' >"$BATS_TEST_TMPDIR/header.toml"
  printf '[train]\nlr = 0.1\n[tr\001ain]\n' >"$BATS_TEST_TMPDIR/control.toml"
  printf 'ses\315\221[T \n' >"$BATS_TEST_TMPDIR/utf8.toml"
  for f in header control utf8; do
    run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/$f.toml" --print-config
    echo "$output"
    [ "$status" -eq 2 ]
    [[ $output != *"Assertion"* ]]
  done
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/header.toml" --print-config
  [[ $output == *"header.toml:3:2: a table header must start with a name ([section]), not '#'"* ]]
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/control.toml" --print-config
  [[ $output == *"control.toml:3:4: control character U+0001"* ]]
  run "$BUILD/bin/slurm-train" run --config "$BATS_TEST_TMPDIR/utf8.toml" --print-config
  [[ $output == *"utf8.toml:1:4: a character that is not ASCII outside a string or comment"* ]]
}

@test "--hang-timeout must be finite and not negative; --log-dir= is empty and takes no other argument" {
  for t in nan inf -1; do
    run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --hang-timeout="$t"
    [ "$status" -eq 2 ]
    [[ $output == *"--hang-timeout $t: expected seconds (a finite number), or 0 to turn hang detection off"* ]]
  done
  cd "$BATS_TEST_TMPDIR"
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --log-dir= --no-resume --progress lines
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"rank logs in (none: --log-dir is empty)"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/--no-resume" ]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR")" ]
}

@test "train.save, metrics and prometheus in a missing folder are refused before training (exit 2)" {
  for key in train.save train.metrics train.prometheus; do
    for mode in --dry-run --train.steps=2; do
      run "$BUILD/bin/slurm-train" run "${SMALL[@]}" "--$key=$BATS_TEST_TMPDIR/missing/out" "$mode"
      echo "$output"
      [ "$status" -eq 2 ]
      [[ $output == *"$key = '$BATS_TEST_TMPDIR/missing/out': its folder '$BATS_TEST_TMPDIR/missing' does not exist"* ]]
      [[ $output != *"train_loss"* ]]
    done
  done
}

@test "under mpirun -n 4 a configuration error, a missing file and --print-config are printed once; exit 2" {
  run mpirun -n 4 --oversubscribe "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --train.lr nan
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c "train.lr = 'nan': expected a finite number" <<<"$output")" -eq 1 ]
  [[ $output == *"(found alike by all 4 ranks before MPI started; reported by rank 0)"* ]]
  [[ $output != *"MPI_ABORT"* ]]
  run mpirun -n 4 --oversubscribe "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --data.test "$BATS_TEST_TMPDIR/none.h5"
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c "cannot open HDF5 file '$BATS_TEST_TMPDIR/none.h5'" <<<"$output")" -eq 1 ]
  [[ $output != *"MPI_ABORT"* ]]
  run mpirun -n 4 --oversubscribe "$BUILD/bin/slurm-train" run "${SMALL[@]}" --print-config
  [ "$status" -eq 0 ]
  [ "$(grep -c '^train.lr ' <<<"$output")" -eq 1 ]
  run mpirun -n 4 --oversubscribe "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.stpes 2
  [ "$status" -eq 2 ]
  [ "$(grep -c "unknown option '--train.stpes'" <<<"$output")" -eq 1 ]
}

@test "sample refuses an MLP checkpoint, naming its model, and bad option values before it reads one (exit 2)" {
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2 --ckpt.dir "$BATS_TEST_TMPDIR/ck" --ckpt.every 2
  [ "$status" -eq 0 ]
  run "$BUILD/bin/slurm-train" sample "$BATS_TEST_TMPDIR/ck" --prompt "x"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"step-00000002.h5 holds an mlp model; sample needs a gpt checkpoint (model.kind = \"gpt\")"* ]]
  [[ $output != *"sampling"* ]]
  for bad in "--tokens=-1" "--tokens=1e3" "--top-k=-2" "--seed=-5" "--seed=18446744073709551616" \
    "--temperature=inf" "--temperature=-0.5"; do
    run "$BUILD/bin/slurm-train" sample "$BATS_TEST_TMPDIR/ck" "$bad"
    echo "$bad: $output"
    [ "$status" -eq 2 ]
    value=${bad#*=}
    [[ $output == *"${bad%%=*}: $value: expected "* ]]
  done
}
