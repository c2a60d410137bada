#!/usr/bin/env bats
# The GPT model of the engine (train/gpt.h) against an oracle we did not write: the same
# architecture in plain PyTorch, loaded with our parameters, on the same batch.

load helpers

@test "gpt: logits, loss, every parameter's gradient and three clipped AdamW steps equal PyTorch's within 1e-5 (relative, fp32)" {
  $PY -c 'import torch, h5py' 2>/dev/null || skip "python3-torch or python3-h5py is not installed (scripts/install-deps.sh)"
  run "$BUILD/test/gpt_oracle" "$BATS_TEST_TMPDIR/gpt.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  run $PY "$ROOT/test/integration/gpt_oracle.py" "$BATS_TEST_TMPDIR/gpt.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"61 checks, worst "*"(limit 1e-5)"* ]]
  [ "$(grep -c "^clip step " <<<"$output")" -eq 3 ]
  [ "$(grep -c '^grad ' <<<"$output")" -eq 28 ]
  [ "$(grep -c "^adamw " <<<"$output")" -eq 28 ]
}
