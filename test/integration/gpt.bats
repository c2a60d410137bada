#!/usr/bin/env bats
# The GPT model of the engine (train/models/gpt.h) against an oracle we did not write: the same
# architecture in plain PyTorch, loaded with our parameters, on the same batch.

load helpers

@test "gpt: logits, loss, every parameter's gradient and three clipped AdamW steps equal PyTorch's within 1e-5 (relative, fp32; a parameter's change within one fp32 step of its values where larger)" {
  $PY -c 'import torch, h5py' 2>/dev/null || skip "python3-torch or python3-h5py is not installed (scripts/install-deps.sh)"
  run "$BUILD/test/gpt_oracle" "$BATS_TEST_TMPDIR/gpt.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  run $PY "$ROOT/test/integration/gpt_oracle.py" "$BATS_TEST_TMPDIR/gpt.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"61 checks, worst "*" against its limit "* ]]
  # The wider limit is for the LayerNorm weights alone (values near 1), every other check at 1e-5.
  [ "$(grep -c 'one fp32 step of the values)' <<<"$output")" -eq 5 ]
  [ "$(grep -c "^clip step " <<<"$output")" -eq 3 ]
  [ "$(grep -c '^grad ' <<<"$output")" -eq 28 ]
  [ "$(grep -c "^adamw " <<<"$output")" -eq 28 ]
}

@test "gpt: from the same parameters on one repeated batch, ten clipped AdamW steps' losses follow PyTorch's" {
  $PY -c 'import torch, h5py' 2>/dev/null || skip "python3-torch or python3-h5py is not installed (scripts/install-deps.sh)"
  run "$BUILD/test/gpt_trajectory" --vocab 512 --seq 64 --layers 2 --heads 4 --embd 64 --batch 4 --steps 10 \
    --threads 1 --out "$BATS_TEST_TMPDIR/trajectory.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^step ' <<<"$output")" -eq 10 ]
  run $PY "$ROOT/test/integration/gpt_trajectory.py" --threads 1 "$BATS_TEST_TMPDIR/trajectory.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^step ' <<<"$output")" -eq 10 ]
  worst=$(sed -n 's/^10 steps, largest relative difference of the losses \(.*\)$/\1/p' <<<"$output")
  [ -n "$worst" ]
  python3 -c "import sys; sys.exit(0 if float('$worst') < 1e-5 else 1)"
}
