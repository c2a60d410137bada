#!/usr/bin/env bats
# bench/compare.py, make bench's comparison: figures against the one table of targets and against
# the previous run's, fed results files written here (no benchmark runs).

setup() {
  cd "$BATS_TEST_DIRNAME/../.."
  T=$(mktemp -d)
  cat >"$T/targets.tsv" <<'TSV'
# key	kind	target	what
write	ratio	>= 0.9	checkpoint write against dd
startup	over	<= 0.5	start-up over srun hostname
sharded	speedup	>= 1	sharded write against serial
data	seconds	<= 0.2	data load
cpu	cores	<= 0.05	rank 0's CPU
free	ratio	-	a figure without a target
TSV
}

teardown() { rm -rf "$T"; }

compare() { /usr/bin/python3 bench/compare.py --targets "$T/targets.tsv" "$@"; }

@test "a figure more than 20% worse than the previous run is marked FELL, one less worse is not" {
  printf 'write\t700\t1000\nfree\t2.5\t1\n' >"$T/before.tsv"
  printf 'write\t950\t1000\nfree\t1.9\t1\n' >"$T/now.tsv"   # write better; free 24% worse
  run compare "$T/now.tsv" "$T/before.tsv"
  [ "$status" -eq 0 ]
  [[ $(grep '^free ' <<<"$output") == *FELL* ]]
  [[ $(grep '^write ' <<<"$output") != *FELL* ]]
  printf 'free\t2.1\t1\n' >"$T/now.tsv"   # 16% worse: within the noise allowed
  run compare "$T/now.tsv" "$T/before.tsv"
  [[ $(grep '^free ' <<<"$output") != *FELL* ]]
}

@test "lower-is-better figures fall when they grow by more than 20%" {
  printf 'startup\t0.60\t0.20\ndata\t0.10\n' >"$T/before.tsv"
  printf 'startup\t0.70\t0.20\ndata\t0.13\n' >"$T/now.tsv"   # over 0.40 -> 0.50 (+25%); data +30%
  run compare "$T/now.tsv" "$T/before.tsv"
  [[ $(grep '^startup ' <<<"$output") == *FELL* ]]
  [[ $(grep '^data ' <<<"$output") == *FELL* ]]
}

@test "each target is judged by its kind: ratio, speed-up, seconds over the peer, seconds" {
  printf 'write\t850\t1000\nstartup\t0.80\t0.25\nsharded\t0.5\t0.6\ndata\t0.19\n' >"$T/now.tsv"
  run compare "$T/now.tsv"
  [[ $(grep '^write ' <<<"$output") == *"NOT MET (>= 0.9)"* ]]    # 0.85 of dd
  [[ $(grep '^startup ' <<<"$output") == *"NOT MET (<= 0.5)"* ]]  # 0.55 s over
  [[ $(grep '^sharded ' <<<"$output") != *"NOT MET"* ]]           # 0.6 / 0.5 = 1.2x
  [[ $(grep '^data ' <<<"$output") != *"NOT MET"* ]]
  [[ $output == *"4 figures: 0 fell more than 20% (no previous results), 2 below target"* ]]
}

@test "--verdict gives one figure's target and verdict for a table row" {
  run compare --verdict write 950 1000
  [ "$output" = ">= 0.9 met" ]
  run compare --verdict startup 0.9 0.25
  [ "$output" = "<= 0.5 NOT MET" ]
  run compare --verdict free 1 1
  [ "$output" = "- -" ]
}

@test "make bench's own targets table parses, and names every figure the benchmarks record" {
  run /usr/bin/python3 -c 'import sys; sys.path.insert(0, "bench"); import compare; print(" ".join(sorted(compare.read_targets("bench/targets.tsv"))))'
  [ "$status" -eq 0 ]
  for key in $(grep -ho 'bench_record [a-z_0-9]*' bench/*.sh | awk '{ print $2 }' | sort -u); do
    [[ " $output " == *" $key "* ]] || { echo "bench_record $key has no row in bench/targets.tsv"; false; }
  done
}

@test "a share of a core is measured alone, lower is better: above its bound NOT MET, 30% more FELL" {
  printf 'cpu\t0.030\n' >"$T/before.tsv"
  printf 'cpu\t0.040\n' >"$T/now.tsv"
  run compare "$T/now.tsv" "$T/before.tsv"
  [ "$status" -eq 0 ]
  [[ $(grep '^cpu ' <<<"$output") == *FELL* ]]
  [[ $(grep '^cpu ' <<<"$output") != *"NOT MET"* ]]
  printf 'cpu\t0.060\n' >"$T/now.tsv"
  run compare "$T/now.tsv"
  [[ $(grep '^cpu ' <<<"$output") == *"NOT MET (<= 0.05)"* ]]
  run compare --verdict cpu 0.04
  [ "$output" = "<= 0.05 met" ]
}
