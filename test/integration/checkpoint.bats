#!/usr/bin/env bats
# Checkpoints: exact resume on 1 and 2 ranks and across world sizes, crash consistency
# under SIGKILL mid-write, corruption and truncation falling back to the previous file, a full
# filesystem and an unwritable folder (a path under a file, EACCES, a read-only mount), files
# crafted with h5py to be hostile (arrays where scalars belong, absurd sizes, a step past the
# schedule), the ckpt list/show/verify commands, h5py, and the model run in PyTorch.

load helpers

setup_file() {
  ensure_fashion_mnist
}

small_args() {
  echo --config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5" \
    --data.test "$TEST_DATA/test.h5" --model.hidden "[64,32]" --train.eval_batch 2000 --train.warmup_steps 5
}

# shellcheck disable=SC2046
small_run() { "$BUILD/bin/slurm-train" run $(small_args) "$@"; }
# shellcheck disable=SC2046
mpi_run() {
  local n=$1
  shift
  mpirun -n "$n" --oversubscribe --bind-to none "$BUILD/bin/slurm-train" run $(small_args) "$@"
}

# same_losses A.jsonl B.jsonl TOLERANCE: the same steps with the same loss, lr and gradient
# norm (exactly when TOLERANCE is 0).
same_losses() {
  $PY - "$@" <<'PY'
import json, sys
# Step lines only: evaluations ({"eval": ...}) are checked by the parameters' equality.
a = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
b = [r for r in map(json.loads, open(sys.argv[2])) if "step" in r]
tol = float(sys.argv[3])
assert [r["step"] for r in a] == [r["step"] for r in b], ([r["step"] for r in a], [r["step"] for r in b])
for x, y in zip(a, b):
    for k in ("loss", "lr", "grad_norm", "accuracy"):
        ok = x[k] == y[k] if tol == 0 else abs(x[k] - y[k]) <= tol * max(1.0, abs(x[k]))
        assert ok, (x["step"], k, x[k], y[k])
print("ok", len(a))
PY
}

@test "exact resume on 1 rank: 2N steps == N steps, then a new process resuming for N more (parameters and losses)" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 30 --train.metrics "$d/full.jsonl" --train.save "$d/full.h5" >/dev/null
  run small_run --train.steps 30 --train.stop_after 15 --ckpt.dir "$d/ck" --train.metrics "$d/split.jsonl"
  [ "$status" -eq 0 ]
  [[ $output == *"checkpoint step 15 -> $d/ck/step-00000015.h5"*"training stalled"* ]]
  [[ $output == *"stopping after step 15 of 30"* ]]
  [ "$(cat "$d/ck/latest")" = step-00000015.h5 ]
  run small_run --train.steps 30 --ckpt.dir "$d/ck" --train.metrics "$d/split.jsonl" --train.save "$d/split.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck/step-00000015.h5 at step 15"* ]]
  run h5diff "$d/full.h5" "$d/split.h5" /model /model
  [ "$status" -eq 0 ]
  run same_losses "$d/full.jsonl" "$d/split.jsonl" 0
  [ "$output" = "ok 30" ]
  # the checkpoint at the end holds the same parameters as the saved model
  run $PY "$ROOT/test/integration/compare_models.py" "$d/ck/step-00000030.h5" "$d/full.h5" 0
  [ "$status" -eq 0 ]
}

@test "a checkpoint folder another user could change is refused before anything is read there (exit 2)" {
  d=$BATS_TEST_TMPDIR/shared
  mkdir -p "$d"
  chmod 1777 "$d"
  run --separate-stderr small_run --train.steps 4 --ckpt.dir "$d" --train.metrics ""
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"the checkpoint folder '$d' can be written by every user (mode 1777): anyone could plant or replace what the job reads there"* ]]
  [ ! -e "$d/owner" ]
  chown nobody "$d"
  chmod 755 "$d"
  run --separate-stderr small_run --train.steps 4 --ckpt.dir "$d" --train.metrics ""
  [ "$status" -eq 2 ]
  [[ $stderr == *"the checkpoint folder '$d' belongs to uid "*" (nobody), not to this job's user"* ]]
}

@test "a checkpoint records the device it was written on; one from the GPU resumes on the CPU and says so" {
  d=$BATS_TEST_TMPDIR
  run small_run --train.steps 20 --train.stop_after 10 --ckpt.dir "$d/ck" --train.metrics ""
  [ "$status" -eq 0 ]
  run "$BUILD/bin/slurm-train" ckpt show "$d/ck/step-00000010.h5"
  [[ $output == *"device           cpu"* ]]
  # The same state as a GPU run writes it: only /meta device differs (attributes carry no checksum).
  $PY -c "
import h5py
with h5py.File('$d/ck/step-00000010.h5', 'r+') as f:
    assert f['meta'].attrs['device'] in (b'cpu', 'cpu'), f['meta'].attrs['device']
    f['meta'].attrs['device'] = 'cuda:0 (NVIDIA H200, bf16)'"
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck/step-00000010.h5"
  [ "$status" -eq 0 ]
  run small_run --train.steps 20 --ckpt.dir "$d/ck" --train.metrics ""
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck/step-00000010.h5 at step 10"* ]]
  [[ $output == *"the checkpoint was written on the GPU, cuda:0 (NVIDIA H200, bf16); this run continues on the CPU"* ]]
  # A CPU checkpoint resumed on the CPU says nothing of devices.
  run small_run --train.steps 30 --ckpt.dir "$d/ck" --train.metrics ""
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck/step-00000020.h5"* ]]
  [[ $output != *"was written on"* ]]
}

@test "exact resume on 2 ranks (mpirun), and a 2-rank checkpoint continues on 1 rank with the same global batches" {
  d=$BATS_TEST_TMPDIR
  mpi_run 2 --train.steps 24 --train.metrics "$d/full.jsonl" --train.save "$d/full.h5" >/dev/null
  run mpi_run 2 --train.steps 24 --train.stop_after 12 --ckpt.dir "$d/ck" --train.metrics "$d/split.jsonl"
  [ "$status" -eq 0 ]
  cp -r "$d/ck" "$d/ck1"
  cp "$d/split.jsonl" "$d/one.jsonl"
  run mpi_run 2 --train.steps 24 --ckpt.dir "$d/ck" --train.metrics "$d/split.jsonl" --train.save "$d/split.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck/step-00000012.h5 at step 12"* ]]
  run h5diff "$d/full.h5" "$d/split.h5" /model /model
  [ "$status" -eq 0 ]
  run same_losses "$d/full.jsonl" "$d/split.jsonl" 0
  [ "$output" = "ok 24" ]
  # the same checkpoint on 1 rank: same global batches, so the same losses up to reduction order
  run small_run --train.steps 24 --ckpt.dir "$d/ck1" --train.metrics "$d/one.jsonl" --train.save "$d/one.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"resumed from $d/ck1/step-00000012.h5 at step 12 (epoch 0, batch 12 of the epoch; written by 2 rank(s))"* ]]
  run same_losses "$d/full.jsonl" "$d/one.jsonl" 1e-4
  [ "$output" = "ok 24" ]
  run $PY "$ROOT/test/integration/compare_models.py" "$d/one.h5" "$d/full.h5" 1e-4
  [ "$status" -eq 0 ]
}

@test "SIGKILL at random moments during checkpoint writes: 10 trials, each resumes from a good checkpoint, none reads a partial file" {
  d=$BATS_TEST_TMPDIR/kill
  mid_write=0
  for trial in $(seq 1 10); do
    # --inject-fault slow-ckpt@20: the documented testing aid that pauses 20 ms after each 64 KiB
    # written, so that one checkpoint (640 KiB) takes about 0.2 s on disk. The program itself
    # runs in the background (not a function's subshell), so that the kill reaches it.
    # shellcheck disable=SC2046
    "$BUILD/bin/slurm-train" run $(small_args) --train.steps 100000 --ckpt.dir "$d" --inject-fault slow-ckpt@20 \
      --ckpt.every 2 --ckpt.keep 2 --train.metrics "" >"$BATS_TEST_TMPDIR/run.log" 2>&1 &
    pid=$!
    # Wait for a write to start (one of the first few), then kill at a random moment within it.
    skip_writes=$((RANDOM % 2))
    for write in $(seq 0 "$skip_writes"); do
      deadline=$((SECONDS + 10))
      until compgen -G "$d/step-*.h5.tmp-*" >/dev/null || [ $SECONDS -ge $deadline ]; do sleep 0.01; done
      [ "$write" -eq "$skip_writes" ] || while compgen -G "$d/step-*.h5.tmp-*" >/dev/null; do sleep 0.01; done
    done
    sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", rand() * 0.18 }')"
    if compgen -G "$d/step-*.h5.tmp-*" >/dev/null; then mid_write=$((mid_write + 1)); fi
    kill -KILL "$pid"
    wait "$pid" || true
    # Every committed file is whole; a partial write is only ever a .tmp.
    if compgen -G "$d/step-*.h5" >/dev/null; then
      run "$BUILD/bin/slurm-train" ckpt verify "$d"
      echo "trial $trial: $output"
      [ "$status" -eq 0 ]
    fi
    newest=$(ls "$d" 2>/dev/null | grep -E '^step-[0-9]+\.h5$' | sort | tail -n 1 || true)
    step=0
    if [ -n "$newest" ]; then step=${newest#step-}; step=$((10#${step%.h5})); fi
    run --separate-stderr small_run --train.steps 100000 --ckpt.dir "$d" --ckpt.every 2 --ckpt.keep 2 \
      --train.metrics "" --train.stop_after "$((step + 1))"
    echo "trial $trial: newest $newest: $output $stderr"
    [ "$status" -eq 0 ]
    if [ -n "$newest" ]; then [[ $output == *"resumed from $d/$newest at step $step "* ]]; fi
    [[ $stderr != *unusable* ]]
  done
  echo "kills while a checkpoint was being written: $mid_write of 10" >&3
  [ "$mid_write" -ge 8 ]
}

@test "a corrupt or truncated newest checkpoint fails ckpt verify, and the run resumes from the previous one with a warning" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 30 --train.stop_after 12 --ckpt.dir "$d/ck" --ckpt.every 4 --train.metrics "" >/dev/null
  f=$d/ck/step-00000012.h5
  offset=$($PY -c "import h5py; print(h5py.File('$f')['/model/layer2.weight'].id.get_offset())")
  printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek="$((offset + 64))" conv=notrunc status=none
  run "$BUILD/bin/slurm-train" ckpt verify "$f"
  [ "$status" -eq 1 ]
  [[ $output == *"FAIL $f"*"dataset /model/layer2.weight: checksum mismatch"* ]]
  # ckpt show checks every tensor's checksum too (without keeping the tensors).
  run --separate-stderr "$BUILD/bin/slurm-train" ckpt show "$f"
  [ "$status" -eq 1 ]
  [[ $stderr == *"$f: dataset /model/layer2.weight: checksum mismatch"* ]]
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck"
  [ "$status" -eq 1 ]
  [[ $output == *"OK   $d/ck/step-00000008.h5"*"2 of 3 checkpoint(s) valid"* ]]
  run "$BUILD/bin/slurm-train" ckpt list "$d/ck"
  [[ $output =~ 12\ +[0-9.]+\ KiB\ +[0-9-]+\ [0-9:]+\ +INVALID:.*layer2.weight ]]
  run --separate-stderr small_run --train.steps 30 --train.stop_after 13 --ckpt.dir "$d/ck" --train.metrics ""
  [ "$status" -eq 0 ]
  [[ $stderr == *"warning: checkpoint folder $d/ck: step-00000012.h5 is unusable: $f: dataset /model/layer2.weight: checksum mismatch"*"falling back to step-00000008.h5"* ]]
  [[ $output == *"resumed from $d/ck/step-00000008.h5 at step 8"* ]]
  # truncated: the newest (13) cut in half
  truncate -s 200000 "$d/ck/step-00000013.h5"
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck/step-00000013.h5"
  [ "$status" -eq 1 ]
  run --separate-stderr small_run --train.steps 30 --train.stop_after 9 --ckpt.dir "$d/ck" --ckpt.resume true --train.metrics ""
  [[ $stderr == *"step-00000013.h5 is unusable"* ]]
  [[ $output == *"resumed from $d/ck/step-00000008.h5 at step 8"* ]]
}

# full_filesystem RUN...: RUN (small_run, or mpi_run N) trains [128,32] with AdamW, about 1.3 MB a
# checkpoint, into a 2 MB tmpfs, so that the first checkpoint fits and the second does not: the
# run must end with exit 3 naming the path, the partial file removed, the first intact.
full_filesystem() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to mount a tmpfs"
  mnt=$BATS_TEST_TMPDIR/small
  mkdir -p "$mnt"
  mount -t tmpfs -o size=2m tmpfs "$mnt" || skip "cannot mount a tmpfs here"
  run --separate-stderr "$@" --model.hidden "[128,32]" --train.steps 20 --ckpt.dir "$mnt/ck" --ckpt.every 5 \
    --ckpt.keep 0 --train.metrics ""
  echo "status $status: $stderr"
  [ "$status" -eq 3 ]
  [[ $stderr == *"cannot write the checkpoint '$mnt/ck/step-00000010.h5.tmp-"*"'"*"No space left on device"* ]]
  # `restarts` is the launcher's restart record. No `owner`: rank 0 released its claim on the
  # folder before it ended; on 2 ranks, no other rank's exit killed it first.
  echo "in $mnt/ck: $(ls "$mnt/ck" | tr '\n' ' ')"
  [ "$(ls "$mnt/ck")" = "$(printf 'latest\nrestarts\nstep-00000005.h5')" ]
  run "$BUILD/bin/slurm-train" ckpt verify "$mnt/ck"
  [ "$status" -eq 0 ]
  [ "$(cat "$mnt/ck/latest")" = step-00000005.h5 ]
}

@test "a full filesystem is a clear error naming the path (exit 3); the checkpoints before it stay intact" {
  full_filesystem small_run
}

@test "sharded on 2 ranks, a full filesystem is exit 3 naming the path; the checkpoint before it stays intact" {
  full_filesystem mpi_run 2 --train.shard_optimizer true
}

@test "a write that fails inside HDF5's own metadata writes is exit 3 naming the file, no crash; the checkpoint before it stays intact" {
  d=$BATS_TEST_TMPDIR
  # 1024-512 with AdamW: 16 MB checkpoints. The first run writes step 5 with no limit.
  args=(--model.hidden "[1024,512]" --train.steps 12 --ckpt.dir "$d/ck" --ckpt.every 5 --train.metrics "")
  small_run "${args[@]}" --train.stop_after 5 >/dev/null
  # The resumed run may not write files over 8 MB (RLIMIT_FSIZE; SIGXFSZ ignored, so writes fail
  # with EFBIG): its step-10 checkpoint passes the free-space check, and HDF5's flush of the file's
  # metadata (at its end, past 8 MB) is the first write to fail. HDF5 1.10 used to crash at exit
  # after that (exit 139).
  run --separate-stderr bash -c "trap '' XFSZ; ulimit -f 8000; exec \"\$@\"" _ "$BUILD/bin/slurm-train" run $(small_args) \
    "${args[@]}"
  echo "status $status: $stderr"
  [ "$status" -eq 3 ]
  [[ $stderr == *"cannot write the checkpoint '$d/ck/step-00000010.h5.tmp-"*"'"*"File too large"* ]]
  # The partial file removed; `restarts` is the launcher's restart record.
  [ "$(ls "$d/ck")" = "$(printf 'latest\nrestarts\nstep-00000005.h5')" ]
  [ "$(cat "$d/ck/latest")" = step-00000005.h5 ]
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck"
  [ "$status" -eq 0 ]
}

teardown() {
  if mountpoint -q "$BATS_TEST_TMPDIR/small" 2>/dev/null; then umount "$BATS_TEST_TMPDIR/small"; fi
}

@test "an unwritable checkpoint folder is a clear error naming the path (exit 3)" {
  touch "$BATS_TEST_TMPDIR/file"
  run --separate-stderr small_run --train.steps 3 --ckpt.dir "$BATS_TEST_TMPDIR/file/ck" --train.metrics ""
  [ "$status" -eq 3 ]
  [[ $stderr == *"cannot create the checkpoint folder '$BATS_TEST_TMPDIR/file/ck'"* ]]
}

# resume_into_unwritable DIR MESSAGE PREFIX...: DIR/ck holds step 3 and the caller made it
# unwritable; a run resumed there through PREFIX (as another user, say) must end with exit 3,
# MESSAGE and a path in DIR/ck, and leave step 3 intact.
resume_into_unwritable() {
  local d=$1 expected=$2
  shift 2
  run --separate-stderr "$@" "$BUILD/bin/slurm-train" run $(small_args) --train.steps 6 --ckpt.dir "$d/ck" --train.metrics ""
  echo "status $status: $stderr"
  [ "$status" -eq 3 ]
  [[ $stderr == *"'$d/ck/"*"$expected"* ]]
  [ "$(ls "$d/ck")" = "$(printf 'latest\nrestarts\nstep-00000003.h5')" ]
  run "$BUILD/bin/slurm-train" ckpt verify "$d/ck"
  [ "$status" -eq 0 ]
}

@test "a checkpoint folder the user may not write (EACCES: mode 0555, owned by root, run as nobody) is exit 3 naming the path" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to run as another user"
  # Under /tmp, not BATS_TEST_TMPDIR, whose parents nobody may not enter.
  d=$(mktemp -d /tmp/ckpt-eacces-XXXXXX)
  chmod 0755 "$d"
  # nobody's own log folder: one that every user could write would be refused before the claim.
  mkdir -m 0755 "$d/logs"
  chown nobody "$d/logs"
  small_run --train.steps 6 --train.stop_after 3 --ckpt.dir "$d/ck" --train.metrics "" >/dev/null
  chmod 0555 "$d/ck"
  resume_into_unwritable "$d" "Permission denied" setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env HOME="$d" SLURM_TRAIN_LOG_DIR="$d/logs"
  rm -rf "$d"
}

@test "a checkpoint folder on a read-only mount (EROFS) is exit 3 naming the path" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to mount a tmpfs"
  d=$BATS_TEST_TMPDIR/small
  mkdir -p "$d"
  mount -t tmpfs -o size=16m tmpfs "$d" || skip "cannot mount a tmpfs here"
  small_run --train.steps 6 --train.stop_after 3 --ckpt.dir "$d/ck" --train.metrics "" >/dev/null
  mount -o remount,ro "$d"
  resume_into_unwritable "$d" "Read-only file system" env
}

@test "ckpt show and h5ls describe the file; h5py loads the weights into NumPy as docs/checkpoints.md shows" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 6 --ckpt.dir "$d/ck" --train.optimizer sgd --train.metrics "" --train.save "$d/m.h5" >/dev/null
  f=$d/ck/step-00000006.h5
  run "$BUILD/bin/slurm-train" ckpt show "$f"
  [ "$status" -eq 0 ]
  [[ $output == *"format_version   1"*"world_size       1"* ]]
  [[ $output == *"step 6  epoch 0  batch_in_epoch 6"* ]]
  [[ $output == *"kind sgd  step_count 6"* ]]
  [[ $output == *"/optimizer/momentum_buffer/layer1.weight"*"float32  [64, 784]"* ]]
  run h5ls -r "$f"
  [[ $output == *"/model/layer1.weight"*"Dataset {64, 784}"* ]]
  [[ $output == *"/train/step"*"Dataset {SCALAR}"* ]]
  run h5dump -a /meta/format_version "$f"
  [[ $output == *"(0): 1"* ]]
  run $PY - "$f" "$d/m.h5" <<'PY'
import sys, zlib
import h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    weights = {name: f["model"][name][()] for name in f["model"]}   # NumPy arrays
    step = int(f["train/step"][()])
    for name, w in weights.items():                                   # the stored checksums
        assert zlib.crc32(w.astype("<f4").tobytes()) == int(f["model"][name].attrs["crc32"]), name
with h5py.File(sys.argv[2], "r") as m:
    assert all(np.array_equal(weights[n], m["model"][n][()]) for n in weights)
print(step, sorted(weights)[0], weights["layer1.weight"].shape)
PY
  [ "$output" = "6 layer1.bias (64, 784)" ]
}

# craft SOURCE DEST CASE: a copy of checkpoint SOURCE made hostile with h5py (CASE below), as a
# crafted file would be; datasets keep a right crc32 so that only the named check can refuse them.
craft() {
  $PY - "$@" <<'PY'
import shutil, sys, zlib
import h5py, numpy as np
src, dst, case = sys.argv[1:4]
shutil.copy(src, dst)
def replace(f, name, **kwargs):
    del f[name]
    d = f.create_dataset(name, **kwargs)
    d.attrs.create("crc32", zlib.crc32(d[()].tobytes()) if "data" in kwargs else 0, dtype="<u4")
with h5py.File(dst, "r+") as f:
    if case == "format_version":  # an array that overran a scalar read
        f["meta"].attrs.create("format_version", np.arange(4096, dtype="<i8"))
    elif case == "config":
        f["meta"].attrs.create("config", ["x"] * 3000, dtype=h5py.string_dtype())
    elif case == "crc32":
        f["model/layer2.weight"].attrs.create("crc32", np.arange(4096, dtype="<u4"))
    elif case == "step_array":
        replace(f, "train/step", data=np.arange(4096, dtype="<u8"))
    elif case == "dims":  # 2 GiB of zeros if believed; the file stays this small
        replace(f, "model/layer1.weight", shape=(32768, 16384), dtype="<f4")
    elif case == "dims_2p40":
        replace(f, "train/epoch_seconds", shape=(2**40,), dtype="<f8")
    elif case == "overflow":  # (2^61 + 1) * 8 bytes wraps to 8 in 64 bits
        replace(f, "train/seed", shape=(2**61 + 1,), dtype="<u8", chunks=(1024,))
    elif case == "step_max":
        f["train/step"][()] = np.uint64(2**64 - 1)
        f["train/step"].attrs.modify("crc32", np.uint32(zlib.crc32(np.array(2**64 - 1, dtype="<u8").tobytes())))
    else:
        sys.exit("unknown case " + case)
PY
}

# The program built with AddressSanitizer reserves terabytes of address space: `ulimit -v`
# cannot apply to it.
sanitized() { ldd "$BUILD/bin/slurm-train" | grep -q libasan; }

@test "an array where a scalar attribute or dataset belongs: ckpt verify, list and show name it, and a resume falls back" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 30 --train.stop_after 12 --ckpt.dir "$d/ck" --ckpt.every 4 --train.metrics "" >/dev/null
  good=$d/ck/step-00000012.h5
  expect_format_version="/meta: attribute 'format_version' holds int64 [4096]; expected one integer (a scalar)"
  declare -A expected=(
    [format_version]="$expect_format_version"
    [config]="/meta: attribute 'config' holds string [3000]; expected one variable-length string (a scalar)"
    [crc32]="dataset /model/layer2.weight: attribute 'crc32' holds uint32 [4096]; expected one uint32 (a scalar)"
    [step_array]="dataset /train/step: holds uint64 [4096]; expected one uint64 (a scalar)"
  )
  for case in "${!expected[@]}"; do
    f=$d/$case.h5
    craft "$good" "$f" "$case"
    run "$BUILD/bin/slurm-train" ckpt verify "$f"
    echo "$case: $status $output"
    [ "$status" -eq 1 ]
    [[ $output == *"FAIL $f"*"$f: ${expected[$case]}"* ]]
    run --separate-stderr "$BUILD/bin/slurm-train" ckpt show "$f"
    echo "$case: $status $stderr"
    [ "$status" -eq 1 ]
    [[ $stderr == *"$f: ${expected[$case]}"* ]]
  done
  craft "$good" "$good.crafted" format_version
  mv "$good.crafted" "$good"
  run "$BUILD/bin/slurm-train" ckpt list "$d/ck"
  [ "$status" -eq 0 ]
  [[ $output == *"12 "*"INVALID: $good: $expect_format_version"* ]]
  run --separate-stderr small_run --train.steps 30 --train.stop_after 13 --ckpt.dir "$d/ck" --train.metrics ""
  echo "$status $stderr"
  [ "$status" -eq 0 ]
  [[ $stderr == *"step-00000012.h5 is unusable: $good: $expect_format_version"*"falling back to step-00000008.h5"* ]]
  [[ $output == *"resumed from $d/ck/step-00000008.h5 at step 8"* ]]
}

@test "absurd dimensions (2 GiB of zeros, 2^40 elements, a size that overflows): a clear error before any allocation; a resume falls back" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 30 --train.stop_after 12 --ckpt.dir "$d/ck" --ckpt.every 4 --train.metrics "" >/dev/null
  good=$d/ck/step-00000012.h5
  declare -A expected=(
    [dims]="dataset /model/layer1.weight: its shape float32 [32768, 16384] needs 2147483648 bytes but the file stores 0 for it"
    [dims_2p40]="dataset /train/epoch_seconds: its shape float64 [1099511627776] needs 8796093022208 bytes but the file stores 0 for it"
    [overflow]="dataset /train/seed: its shape uint64 [2305843009213693953] of 8-byte elements overflows the address space"
  )
  # 1 GiB of address space: enough for the program, not for the 2 GiB the first file claims.
  # One OpenBLAS thread (none started): each worker thread OpenBLAS starts when the library
  # loads allocates a 128 MiB buffer, and retries for ever when it cannot (blas_memory_alloc),
  # so the process would hang at exit, joining it. Reading a checkpoint uses no BLAS.
  limit=(env OPENBLAS_NUM_THREADS=1 bash -c 'ulimit -v 1048576; exec "$@"' _)
  if sanitized; then limit=(); fi
  for case in "${!expected[@]}"; do
    f=$d/$case.h5
    craft "$good" "$f" "$case"
    [ "$(stat -c %s "$f")" -lt 1000000 ]
    run "${limit[@]}" "$BUILD/bin/slurm-train" ckpt verify "$f"
    echo "$case: $status $output"
    [ "$status" -eq 1 ]
    [[ $output == *"FAIL $f"*"$f: ${expected[$case]}"* ]]
    run --separate-stderr "${limit[@]}" "$BUILD/bin/slurm-train" ckpt show "$f"
    echo "$case: $status $stderr"
    [ "$status" -eq 1 ]
    [[ $stderr == *"$f: ${expected[$case]}"* ]]
  done
  craft "$good" "$good.crafted" dims
  mv "$good.crafted" "$good"
  run --separate-stderr small_run --train.steps 30 --train.stop_after 13 --ckpt.dir "$d/ck" --train.metrics ""
  echo "$status $stderr"
  [ "$status" -eq 0 ]
  [[ $stderr == *"step-00000012.h5 is unusable: $good: ${expected[dims]}"*"falling back to step-00000008.h5"* ]]
  [[ $output == *"resumed from $d/ck/step-00000008.h5 at step 8"* ]]
}

@test "a checkpoint whose /train/step is 2^64-1 is refused naming the file, the value and the range (exit 1), not resumed" {
  d=$BATS_TEST_TMPDIR
  small_run --train.steps 30 --train.stop_after 12 --ckpt.dir "$d/ck" --ckpt.every 4 --train.metrics "" >/dev/null
  f=$d/ck/step-00000012.h5
  craft "$f" "$f.crafted" step_max
  mv "$f.crafted" "$f"
  run --separate-stderr small_run --train.steps 30 --ckpt.dir "$d/ck" --train.metrics ""
  echo "$status $output $stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"cannot resume from $f: its /train/step is 18446744073709551615 but this run has 30 steps (expected 0 to 30)"* ]]
  [[ $output != *"resumed from"* ]]
}

@test "examples/load_in_pytorch.py runs the saved model (and the last checkpoint) in PyTorch from the file alone: the run's test accuracy within 0.05 points" {
  d=$BATS_TEST_TMPDIR
  set_small_args
  # GELU: the script must take the activation from the file, not assume ReLU.
  run "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.epochs 1 --model.activation gelu --train.save "$d/m.h5" \
    --ckpt.dir "$d/ck"
  [ "$status" -eq 0 ]
  final=$(sed -n 's/^final: test_acc \([0-9.]*\)%.*/\1/p' <<<"$output")
  [ -n "$final" ]
  run h5dump -a /preprocessing/mean "$d/m.h5"
  [[ $output == *"(0): 0.286"* ]]
  # The IDX files as shipped, and the imported HDF5 test set.
  for args in "$d/m.h5" "$d/m.h5 --test $TEST_DATA/test.h5" "$d/ck/step-00000240.h5"; do
    # shellcheck disable=SC2086
    run $PY "$ROOT/examples/load_in_pytorch.py" $args
    echo "$args: $output (the run: $final)"
    [ "$status" -eq 0 ]
    [[ $output =~ ^test_acc\ ([0-9.]+)$ ]]
    awk -v a="${BASH_REMATCH[1]}" -v b="$final" 'BEGIN { d = a - b; exit !(d <= 0.05 && d >= -0.05) }'
  done
}
