#!/usr/bin/env bats
# Every libFuzzer target builds and runs clean for a few seconds under ASan and UBSan, from its
# seeds of real files and the same 300 mutations of them every time (the real run is `make fuzz`,
# five minutes a target; too long for make test).

load helpers

@test "make fuzz FUZZ_RUNS=300 FUZZ_SEED=1: every fuzz target runs clean under ASan and UBSan and reports its runs and coverage" {
  command -v clang++-14 >/dev/null || command -v clang++ >/dev/null || skip "clang is not installed (scripts/install-deps.sh)"
  # Built first, quietly (make test builds them before the tests; this is for a run of this file
  # alone): on failure the output shows the findings, not the compiler's lines.
  run make -C "$ROOT" --no-print-directory -j"$(nproc)" BUILD="$BUILD" fuzz-build
  [ "$status" -eq 0 ] || { echo "$output" | tail -n 40; false; }
  run make -C "$ROOT" --no-print-directory BUILD="$BUILD" fuzz FUZZ_SECONDS=60 FUZZ_RUNS=300 FUZZ_SEED=1
  echo "$output" | tail -n 80
  [ "$status" -eq 0 ]
  [[ $output != *"ERROR: "* ]]
  targets=("$ROOT"/test/fuzz/*_fuzz.cc)
  [ "${#targets[@]}" -ge 10 ]
  for source in "${targets[@]}"; do
    target=$(basename "$source" .cc)
    # Its seeds exist, and its report: the runs, then the coverage of the last status line.
    [ -n "$(ls "$ROOT/test/fuzz/seeds/$target")" ]
    report=$(sed -n "/^== $target: /,/^== /p" <<<"$output")
    [[ $report =~ stat::number_of_executed_units:\ +([0-9]+) ]]
    [ "${BASH_REMATCH[1]}" -gt 0 ]
    [[ $report =~ \ cov:\ [0-9]+\ ft:\ [0-9]+ ]]
  done
}

@test "serve's request parser under ASan and UBSan: bodies nested 10^6 deep, as arrays, objects, both and a field's value, are refused cleanly" {
  command -v clang++-14 >/dev/null || command -v clang++ >/dev/null || skip "clang is not installed (scripts/install-deps.sh)"
  run make -C "$ROOT" --no-print-directory -j"$(nproc)" BUILD="$BUILD" "$BUILD/fuzz/serve_request_fuzz"
  [ "$status" -eq 0 ] || { echo "$output" | tail -n 40; false; }
  cd "$BATS_TEST_TMPDIR"
  $PY -c 'n = 10**6; open("arrays", "w").write("{\"data\": " + "[" * n + "]" * n + "}")'
  $PY -c 'n = 10**6; open("objects", "w").write("{\"a\":" * n + "1" + "}" * n)'
  $PY -c 'n = 10**6 // 2; open("both", "w").write("{\"prompt\": " + "[{\"a\":" * n + "]" * n)'
  # A value named in an error message ("tokens" is ...): rendering it once recursed this deep.
  $PY -c 'n = 10**6; open("tokens", "w").write("{\"prompt\": \"a\", \"tokens\": " + "[" * n + "]" * n + "}")'
  for input in arrays objects both tokens; do
    run "$BUILD/fuzz/serve_request_fuzz" -rss_limit_mb=2048 "$input"
    echo "$input: $output" | tail -n 5
    [ "$status" -eq 0 ]
    [[ $output == *"Executed $input"* ]]
  done
}
