#!/usr/bin/env bash
# startup.sh: what the launcher costs before training starts, on the local Slurm cluster (two
# nodes in network namespaces): the time from starting `srun --mpi=pmix -N2 -n2 slurm-train run`
# to its first training step (rank 0 prints the wall-clock time of that step's start), against
# the whole of `srun -N2 -n2 hostname`, measured alternately in the same run. Prints the medians
# of STARTUP_BENCH_TRIALS (default 5) and, with STARTUP_BENCH_ROWS=1, only the table rows.
# Also rank 0's data load (the "data" phase of its start-up line, medians) and what the supervisor
# of `slurm-train exec` adds: `srun -N2 -n2 slurm-train exec -- true` against `srun -N2 -n2 true`,
# alternately. Targets: bench/targets.tsv; each figure is recorded (bench/results.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/results.sh"
source "$ROOT/bench/inputs.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
TRIALS=${STARTUP_BENCH_TRIALS:-5}
PORT=${STARTUP_BENCH_PORT:-6927}  # neither the demo's (6917) nor the tests' (6937)
DIR=$BUILD/bench/cluster
cd "$ROOT"

data=$(fashion_mnist_dir)
plugin=$(cluster_plugin)
scripts/cluster.sh start --dir "$DIR" --port "$PORT" --nodes 2 --plugin "$plugin" >/dev/null
trap 'scripts/cluster.sh stop --dir "$DIR" >/dev/null 2>&1 || true' EXIT
eval "$(scripts/cluster.sh env --dir "$DIR")"

now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
hostname_times=() first_step_times=() phases= true_times=() exec_times=() data_times=()
for _ in $(seq "$TRIALS"); do
  t0=$(now)
  srun -N2 -n2 true
  true_times+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
  t0=$(now)
  srun -N2 -n2 "$BUILD/bin/slurm-train" exec --log-dir= -- true 2>/dev/null
  exec_times+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
  t0=$(now)
  srun -N2 -n2 hostname >/dev/null
  hostname_times+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
  t0=$(now)
  out=$(srun --mpi=pmix -N2 -n2 "$BUILD/bin/slurm-train" run --config examples/fashion-mnist.toml \
    --data.train "$data/train.h5" --data.test "$data/test.h5" --train.steps 1 --train.metrics "" \
    --train.log_every 0 --log-dir "" --train.device cpu)
  line=$(grep '^start-up:' <<<"$out") || { echo "$out" >&2; echo "startup.sh: no start-up line" >&2; exit 1; }
  first=$(sed -n 's/.*(unix time \([0-9.]*\)).*/\1/p' <<<"$line")
  first_step_times+=("$(awk -v a="$t0" -v b="$first" 'BEGIN { print b - a }')")
  phases=${line#start-up: }
  data_times+=("$(sed -n 's/.* data \([0-9.]*\) s.*/\1/p' <<<"$line")")
done
h=$(printf '%s\n' "${hostname_times[@]}" | median)
f=$(printf '%s\n' "${first_step_times[@]}" | median)
d=$(printf '%s\n' "${data_times[@]}" | median)
t=$(printf '%s\n' "${true_times[@]}" | median)
e=$(printf '%s\n' "${exec_times[@]}" | median)
bench_record startup "$f" "$h"
bench_record startup_data "$d"
bench_record exec "$e" "$t"
# row KEY WHAT VALUE PEER NOTE: one row of make bench's table, the difference as its ratio.
row() {
  local target verdict peer=- difference=-
  read -r target verdict <<<"$(bench_verdict "$1" "$3" "$4" | sed 's/^\([<>]=\) /\1/')"
  if [[ -n $4 ]]; then
    peer=$(printf %.2f "$4")
    difference=$(awk -v a="$3" -v b="$4" 'BEGIN { printf "%+.2fs", a - b }')
  fi
  printf '%-52s %12.2f %12s %8s %8s  %s' "$2" "$3" "$peer" "$difference" "$target" "$verdict $5"
}
row_text=$(row startup "start-up: srun to first step, 2 ranks on 2 nodes, s" "$f" "$h" "(peer: srun hostname, whole; ratio: the difference)")
data_row=$(row startup_data "start-up: rank 0's data load (and model), s" "$d" "" "(Fashion-MNIST, 55 MB; from its start-up line)")
exec_row=$(row exec "exec: srun slurm-train exec -- true, 2 ranks/2 nodes, s" "$e" "$t" "(peer: srun true; ratio: the difference)")
if [[ ${STARTUP_BENCH_ROWS:-0} = 1 ]]; then
  echo "$row_text"
  echo "$data_row"
  echo "$exec_row"
  echo "   (start-up of the last trial, as rank 0 logs it: $phases)"
  exit 0
fi
echo "srun hostname (whole):         ${hostname_times[*]} s; median $h s"
echo "srun slurm-train to 1st step:  ${first_step_times[*]} s; median $f s"
echo "last trial's phases: $phases"
echo "srun true:                     ${true_times[*]} s; median $t s"
echo "srun slurm-train exec -- true: ${exec_times[*]} s; median $e s"
echo "$row_text"
echo "$data_row"
echo "$exec_row"
