#!/usr/bin/env bash
# run-tests.sh: runs every test suite (unit, integration) and ends with one line for all of them:
#   N passed, N failed[, N skipped]
# with each skip's reason printed above it (a skip is never counted as a pass). Exits non-zero
# when any test or suite failed.
#
#   BUILD=build        the build folder (make test sets it; build/sanitize with SANITIZE=1)
#   TEST_FILES="..."   only these integration files (default: test/integration/*.bats)
#   TEST_JOBS=N        integration files run N at a time, each on its own cluster (default 3)
#   UNIT_ARGS="..."    extra doctest arguments, e.g. UNIT_ARGS='-tc=hostlist*'
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
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
# They run beside the integration tests (start_doctest), whose lanes mostly wait, and are
# reported when done (finish_doctest). The CUDA kernel tests' cases skipped for want of a GPU
# each print "skipped: <case>: <reason>" (test/cuda/main.cc); those lines are listed.
declare -A doctest_pids=()

# start_doctest NAME BINARY
start_doctest() {
  local name=$1 bin=$2 log=$log_dir/$1.log
  [ -x "$bin" ] || return 0
  # shellcheck disable=SC2086
  "$bin" --no-version ${UNIT_ARGS:-} >"$log" 2>&1 &
  doctest_pids[$name]=$!
}

# finish_doctest NAME BINARY
finish_doctest() {
  local name=$1 bin=$2 log=$log_dir/$1.log summary reasons
  echo "== $name tests ($bin)"
  if [ ! -x "$bin" ]; then
    failed=$((failed + 1)); failure_lines+=("$name: $bin was not built")
    return
  fi
  wait "${doctest_pids[$name]}"
  grep -vE '^\[doctest\] (run with|doctest version)|^skipped: ' "$log"
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

# Built only where nvcc was found; elsewhere the suite counts as one skip with that reason.
finish_cuda() {
  if [ -e "$BUILD/test/cuda-tests" ]; then
    finish_doctest cuda-tests "$BUILD/test/cuda-tests"
  else
    echo "== cuda tests: not built"
    skipped=$((skipped + 1)); skip_lines+=("cuda-tests: the CUDA tests were not built (no nvcc when this tree was built)")
  fi
}

# ---- integration tests (bats, TAP): one 'ok'/'not ok' line a test ----
# The files run TEST_JOBS at a time (default 3), each lane on a cluster of its own port
# (TEST_CLUSTER_PORT, 6937, plus 4 a lane: a cluster takes its port and the two above it). Many
# tests wait on daemons, timeouts and the queue, so lanes overlap that waiting with another
# file's work. The longest files start first (test/integration/durations: seconds a file took
# on 2 cores; a file not listed counts as long); each file's TAP is printed whole when it ends.
# A run writes the durations it measured to $log_dir/durations, to refresh that table. A file
# whose load would falsify it or its neighbours says "# make test: alone" on its second line: it
# runs after the lanes, with nothing beside it.
integration_order() {
  local table=test/integration/durations f
  for f in "$@"; do
    printf '%s %s\n' "$(awk -v f="$(basename "$f")" '$1 == f {print $2}' "$table" 2>/dev/null | grep . || echo 100000)" "$f"
  done | sort -k1,1nr -k2 | cut -d' ' -f2-
}

# integration_lane LANE: runs files from the queue until it is empty.
integration_lane() {
  local lane=$1 port=$((${TEST_CLUSTER_PORT:-6937} + 4 * $1)) file start tap
  while :; do
    # shellcheck disable=SC2016 # the arguments expand in the inner shell
    file=$(flock "$queue.lock" sh -c 'head -n 1 "$1" && sed -i 1d "$1"' _ "$queue")
    [ -n "$file" ] || return 0
    tap=$tap_dir/$(basename "$file" .bats).tap start=$SECONDS
    TEST_CLUSTER_PORT=$port bats --tap "$file" >"$tap" 2>&1
    echo $? >"$tap.status"
    echo "$(basename "$file") $((SECONDS - start))" >>"$tap_dir/durations"
    # shellcheck disable=SC2016
    flock "$queue.lock" sh -c '{ echo "== $1 (lane $2, $3 s)"; cat "$4"; } | tee -a "$5"' _ \
      "$file" "$lane" $((SECONDS - start)) "$tap" "$log_dir/integration.log"
  done
}

run_integration() {
  local files jobs=${TEST_JOBS:-3} queue tap_dir=$log_dir/integration lane pids=() f alone=() shared=()
  # shellcheck disable=SC2206
  files=(${TEST_FILES:-test/integration/*.bats})
  [[ $jobs =~ ^[1-9][0-9]?$ ]] || { echo "TEST_JOBS '$jobs': expected a number of lanes from 1 to 99" >&2; exit 2; }
  echo "== integration tests: ${#files[@]} files, $jobs at a time"
  rm -rf "$tap_dir" "$log_dir/integration.log" && mkdir -p "$tap_dir"
  queue=$tap_dir/queue
  : >"$queue"
  for f in "${files[@]}"; do
    if head -n 5 "$f" | grep -qx '# make test: alone'; then alone+=("$f"); else shared+=("$f"); fi
  done
  [ ${#shared[@]} -eq 0 ] || integration_order "${shared[@]}" >"$queue"
  for ((lane = 0; lane < jobs; lane++)); do
    integration_lane "$lane" &
    pids+=($!)
  done
  wait "${pids[@]}"
  # Then each file that must run with nothing beside it (its second line: "# make test: alone").
  [ ${#alone[@]} -eq 0 ] || printf '%s\n' "${alone[@]}" >"$queue"
  integration_lane 0
  sort -k2,2nr "$tap_dir/durations" >"$log_dir/durations"
  for f in "${files[@]}"; do count_tap "$f" "$tap_dir/$(basename "$f" .bats).tap"; done
}

# count_tap FILE TAP: adds FILE's results to the counts.
count_tap() {
  local file=$1 tap=$2 status planned ran=0 line failures_before=${#failure_lines[@]}
  status=$(cat "$tap.status" 2>/dev/null || echo "none")
  planned=$(grep -m1 -E '^1\.\.[0-9]+$' "$tap" 2>/dev/null | cut -d. -f3)
  while IFS= read -r line; do
    if [[ $line =~ ^ok\ [0-9]+\ (.*)\ \#\ skip\ ?(.*)$ ]]; then
      skipped=$((skipped + 1)); ran=$((ran + 1))
      skip_lines+=("integration: ${BASH_REMATCH[1]}: ${BASH_REMATCH[2]:-no reason given}")
    elif [[ $line =~ ^ok\ [0-9]+ ]]; then
      passed=$((passed + 1)); ran=$((ran + 1))
    elif [[ $line =~ ^not\ ok\ [0-9]+\ (.*)$ ]]; then
      failed=$((failed + 1)); ran=$((ran + 1))
      failure_lines+=("integration: $(basename "$file"): ${BASH_REMATCH[1]}")
    fi
  done < <(cat "$tap" 2>/dev/null)
  if [ -z "$planned" ] || [ "$ran" -ne "$planned" ]; then
    failed=$((failed + 1))
    failure_lines+=("integration: $(basename "$file"): bats planned ${planned:-?} tests and reported $ran (status $status); see $tap")
  elif [ "$status" != 0 ] && [ ${#failure_lines[@]} -eq "$failures_before" ]; then
    failed=$((failed + 1)); failure_lines+=("integration: $(basename "$file"): bats exited with status $status; see $tap")
  fi
}

start_doctest unit "$BUILD/test/unit-tests"
start_doctest cuda-tests "$BUILD/test/cuda-tests"
run_integration
finish_doctest unit "$BUILD/test/unit-tests"
finish_cuda

echo
for line in "${failure_lines[@]}"; do echo "FAILED: $line"; done
for line in "${skip_lines[@]}"; do echo "skipped: $line"; done
summary="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
