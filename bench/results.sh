# results.sh, sourced by the benchmark scripts.
#   bench_record KEY VALUE [PEER]   appends one figure to the results file that BENCH_RESULTS
#                                   names (nothing when unset), for bench/compare.py
#   bench_verdict KEY VALUE [PEER]  prints the figure's target and "met" / "NOT MET" ("- -" for
#                                   none), from the one table of targets, bench/targets.tsv
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_record() {
  [[ -n ${BENCH_RESULTS:-} ]] || return 0
  printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$BENCH_RESULTS"
}
bench_verdict() {
  /usr/bin/python3 "$BENCH_DIR/compare.py" --verdict --targets "$BENCH_DIR/targets.tsv" "$1" "$2" "${3:-}"
}
