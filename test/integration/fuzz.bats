#!/usr/bin/env bats
# The parsers' libFuzzer target builds and runs clean for a few seconds (the real run is
# `make fuzz`, five minutes; too long for make test).

load helpers

@test "make fuzz FUZZ_SECONDS=5: the parsers' fuzz target runs clean under ASan and UBSan" {
  command -v clang++-14 >/dev/null || command -v clang++ >/dev/null || skip "clang is not installed (scripts/install-deps.sh)"
  run make -C "$ROOT" --no-print-directory BUILD="$BUILD" fuzz FUZZ_SECONDS=5
  echo "$output" | tail -n 20
  [ "$status" -eq 0 ]
  [[ $output == *"Done "*" runs in "* ]]
  [[ $output != *"ERROR: "* ]]
  [[ $output =~ stat::number_of_executed_units:\ +([0-9]+) ]]
  [ "${BASH_REMATCH[1]}" -gt 1000 ]
}
