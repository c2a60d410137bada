#!/usr/bin/env bash
# run-tests.sh: runs every test suite (unit, integration) and ends with one line for all of them:
#   N passed, N failed[, N skipped]
# with each skip's reason printed above it (a skip is never counted as a pass). Exits non-zero
# when any test or suite failed.
#
#   BUILD=build        the build folder (make test sets it; build/sanitize with SANITIZE=1)
#   TEST_FILES="..."   only these integration files (default: test/integration/*.bats)
#   UNIT_ARGS="..."    extra doctest arguments, e.g. UNIT_ARGS='-tc=hostlist*'
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD

# Sanitized builds (SANITIZE=1): stop at the first error. Open MPI's, PMIx's and HDF5's own
# allocations that live until exit are not our leaks (test/lsan.supp); the suppressions only
# match with full stacks (slow unwinding) and with MCA plugins kept loaded until exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/test/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1

passed=0 failed=0 skipped=0
skip_lines=() failure_lines=()
log_dir=$BUILD/test/logs
mkdir -p "$log_dir"

# ---- doctest binaries: their summary line gives the counts ----
# run_doctest NAME BINARY: the unit tests, and the CUDA kernel tests, whose cases skipped for want
# of a GPU each print "skipped: <case>: <reason>" (test/cuda/main.cc); those lines are listed.
run_doctest() {
  local name=$1 bin=$2 log=$log_dir/$1.log
  echo "== $name tests ($bin)"
  if [ ! -x "$bin" ]; then
    failed=$((failed + 1)); failure_lines+=("$name: $bin was not built")
    return
  fi
  # shellcheck disable=SC2086
  "$bin" --no-version ${UNIT_ARGS:-} 2>&1 | tee "$log" | grep -vE '^\[doctest\] (run with|doctest version)|^skipped: '
  local summary reasons
  summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1)
  if [[ $summary =~ ([0-9]+)\ passed\ \|\ ([0-9]+)\ failed\ \|\ ([0-9]+)\ skipped ]]; then
    passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2]))
    skipped=$((skipped + BASH_REMATCH[3]))
    [ "${BASH_REMATCH[2]}" -eq 0 ] || failure_lines+=("$name: ${BASH_REMATCH[2]} test case(s) failed (see $log)")
    reasons=$(grep -c '^skipped: ' "$log")
    while IFS= read -r line; do skip_lines+=("$name: ${line#skipped: }"); done < <(grep '^skipped: ' "$log")
    [ "${BASH_REMATCH[3]}" -eq "$reasons" ] ||
      skip_lines+=("$name: $((BASH_REMATCH[3] - reasons)) test case(s) skipped by their decorators or filters")
  else
    failed=$((failed + 1)); failure_lines+=("$name: the test binary ended without a summary (crash?); see $log")
  fi
}

run_unit() { run_doctest unit "$BUILD/test/unit-tests"; }

# Built only where nvcc was found; elsewhere the suite counts as one skip with that reason.
run_cuda() {
  if [ -e "$BUILD/test/cuda-tests" ]; then
    run_doctest cuda-tests "$BUILD/test/cuda-tests"
  else
    echo "== cuda tests: not built"
    skipped=$((skipped + 1)); skip_lines+=("cuda-tests: the CUDA tests were not built (no nvcc when this tree was built)")
  fi
}

# ---- integration tests (bats, TAP): one 'ok'/'not ok' line a test ----
run_integration() {
  local files log=$log_dir/integration.log
  # shellcheck disable=SC2206
  files=(${TEST_FILES:-test/integration/*.bats})
  echo "== integration tests (${files[*]})"
  bats --tap "${files[@]}" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]} planned ran=0 line
  planned=$(grep -m1 -E '^1\.\.[0-9]+$' "$log" | cut -d. -f3)
  while IFS= read -r line; do
    if [[ $line =~ ^ok\ [0-9]+\ (.*)\ \#\ skip\ ?(.*)$ ]]; then
      skipped=$((skipped + 1)); ran=$((ran + 1))
      skip_lines+=("integration: ${BASH_REMATCH[1]}: ${BASH_REMATCH[2]:-no reason given}")
    elif [[ $line =~ ^ok\ [0-9]+ ]]; then
      passed=$((passed + 1)); ran=$((ran + 1))
    elif [[ $line =~ ^not\ ok\ [0-9]+\ (.*)$ ]]; then
      failed=$((failed + 1)); ran=$((ran + 1))
      failure_lines+=("integration: ${BASH_REMATCH[1]}")
    fi
  done <"$log"
  if [ -z "$planned" ] || [ "$ran" -ne "$planned" ]; then
    failed=$((failed + 1))
    failure_lines+=("integration: bats planned ${planned:-?} tests and reported $ran (status $status); see $log")
  elif [ "$status" -ne 0 ] && [ ${#failure_lines[@]} -eq 0 ]; then
    failed=$((failed + 1)); failure_lines+=("integration: bats exited with status $status; see $log")
  fi
}

run_unit
run_cuda
run_integration

echo
for line in "${failure_lines[@]}"; do echo "FAILED: $line"; done
for line in "${skip_lines[@]}"; do echo "skipped: $line"; done
summary="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
