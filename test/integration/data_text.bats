#!/usr/bin/env bats
# slurm-train data import text and fortunes: plain text to byte tokens in HDF5, read back with h5py
# (a reader we did not write), and the errors for bad input.

load helpers

setup() {
  ST=$BUILD/bin/slurm-train
}

@test "data import fortunes: every fortune file's bytes, training parts then validation parts, as h5py reads them" {
  [ -d /usr/share/games/fortunes ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  run "$ST" data import fortunes --out "$BATS_TEST_TMPDIR/fortunes"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ wrote\ .*/tokens.h5\ \(([0-9]+)\ training\ and\ ([0-9]+)\ validation\ tokens,\ bytes\;\ unigram\ entropy\ of\ the\ training\ split\ ([0-9.]+)\ bits\ per\ byte\) ]]
  run $PY - "$BATS_TEST_TMPDIR/fortunes/tokens.h5" <<'PYEOF'
import math, sys, h5py
f = h5py.File(sys.argv[1], "r")
tokens = f["tokens"][()].tobytes()
a = f.attrs
assert a["tokenizer"] == "bytes" and int(a["vocab_size"]) == 256, dict(a)
train, val = int(a["train_tokens"]), int(a["validation_tokens"])
assert train + val == len(tokens)
frac = float(a["validation_fraction"])
pos_t, pos_v = 0, train
for path, size in zip(a["sources"], a["source_bytes"]):
    data = open(path, "rb").read()
    assert len(data) == size, path
    v = min(max(math.floor(size * frac + 0.5), 1), size - 1) if size >= 2 else 0  # llround: halves away from 0
    assert tokens[pos_t:pos_t + size - v] == data[:size - v], path
    assert tokens[pos_v:pos_v + v] == data[size - v:], path
    pos_t += size - v
    pos_v += v
assert pos_t == train and pos_v == len(tokens)
counts = [0] * 256
for b in tokens[:train]:
    counts[b] += 1
h = -sum(c / train * math.log2(c / train) for c in counts if c)
assert abs(h - float(a["unigram_entropy_bits"])) < 1e-9, (h, float(a["unigram_entropy_bits"]))
print(f"{len(a['sources'])} sources, {train} + {val} tokens, {h:.3f} bits per byte")
PYEOF
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "data import text: missing and empty files, a bad fraction and no file are errors naming them; nothing is written" {
  printf 'hello\n' >"$BATS_TEST_TMPDIR/a.txt"
  : >"$BATS_TEST_TMPDIR/empty.txt"
  run --separate-stderr "$ST" data import text "$BATS_TEST_TMPDIR/a.txt" "$BATS_TEST_TMPDIR/nope.txt" --out "$BATS_TEST_TMPDIR/out"
  [ "$status" -eq 1 ]
  [[ $stderr == *"slurm-train: error: '$BATS_TEST_TMPDIR/nope.txt' is not a readable file"* ]]
  run --separate-stderr "$ST" data import text "$BATS_TEST_TMPDIR/empty.txt" --out "$BATS_TEST_TMPDIR/out"
  [ "$status" -eq 1 ]
  [[ $stderr == *"empty.txt' is empty"* ]]
  run --separate-stderr "$ST" data import text "$BATS_TEST_TMPDIR/a.txt" --out "$BATS_TEST_TMPDIR/out" --validation-fraction 1
  [ "$status" -eq 1 ]
  [[ $stderr == *"--validation-fraction 1: expected a fraction in [0, 1)"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/out/tokens.h5" ]
  run --separate-stderr "$ST" data import text --out "$BATS_TEST_TMPDIR/out"
  [ "$status" -eq 2 ]
  [[ $stderr == *"FILE is required"* ]]
  run "$ST" data import text "$BATS_TEST_TMPDIR/a.txt" --out "$BATS_TEST_TMPDIR/out"
  [ "$status" -eq 0 ]
  [[ $output == *"(5 training and 1 validation tokens"* ]]
}

@test "data import text: text that memory cannot hold is refused before it is read" {
  truncate -s 20G "$BATS_TEST_TMPDIR/big.txt"
  run --separate-stderr bash -c "ulimit -v 2000000; OPENBLAS_NUM_THREADS=1 exec '$ST' data import text '$BATS_TEST_TMPDIR/big.txt' --out '$BATS_TEST_TMPDIR/out'"
  rm -f "$BATS_TEST_TMPDIR/big.txt"
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"importing 1 text file(s) of 20.0 GiB needs 40.0 GiB"*"but only"*"can be allocated here"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/out" ]
}
