#!/usr/bin/env bash
# startup.sh: what the launcher costs before training starts, on the local Slurm cluster (two
# nodes in network namespaces): the time from starting `srun --mpi=pmix -N2 -n2 slurm-train run`
# to its first training step (rank 0 prints the wall-clock time of that step's start), against
# the whole of `srun -N2 -n2 hostname`, measured alternately in the same run. Prints the medians
# of STARTUP_BENCH_TRIALS (default 5) and, with STARTUP_BENCH_ROWS=1, only the table rows.
# Also what the supervisor of `slurm-train exec` adds: `srun -N2 -n2 slurm-train exec -- true`
# against `srun -N2 -n2 true`, alternately (the target: at most 0.3 s more).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
TRIALS=${STARTUP_BENCH_TRIALS:-5}
PORT=${STARTUP_BENCH_PORT:-6927}  # neither the demo's (6917) nor the tests' (6937)
DIR=$BUILD/bench/cluster
cd "$ROOT"

data=data/fashion-mnist
if [[ ! -f $data/train.h5 || ! -f $data/test.h5 ]]; then
  data=$BUILD/bench/fashion-mnist
  [[ -f $data/test.h5 ]] || "$BUILD/bin/slurm-train" data import fashion-mnist --out "$data" >/dev/null
fi
plugin=$BUILD/lib/spank_train.so
[[ -f $plugin ]] || plugin=none
scripts/cluster.sh start --dir "$DIR" --port "$PORT" --nodes 2 --plugin "$plugin" >/dev/null
trap 'scripts/cluster.sh stop --dir "$DIR" >/dev/null 2>&1 || true' EXIT
eval "$(scripts/cluster.sh env --dir "$DIR")"

now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
hostname_times=() first_step_times=() phases= true_times=() exec_times=()
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
done
h=$(printf '%s\n' "${hostname_times[@]}" | median)
f=$(printf '%s\n' "${first_step_times[@]}" | median)
row=$(printf '%-52s %12.2f %12.2f %8s %8s  %s' "start-up: srun to first step, 2 ranks on 2 nodes, s" "$f" "$h" \
  "$(awk -v a="$f" -v b="$h" 'BEGIN { printf "%.2fx", a / b }')" "-" "(peer: srun hostname, whole)")
t=$(printf '%s\n' "${true_times[@]}" | median)
e=$(printf '%s\n' "${exec_times[@]}" | median)
exec_row=$(printf '%-52s %12.2f %12.2f %8s %8s  %s' "exec: srun slurm-train exec -- true, 2 ranks/2 nodes, s" "$e" "$t" \
  "$(awk -v a="$e" -v b="$t" 'BEGIN { printf "%+.2fs", a - b }')" "+0.30s" \
  "$(awk -v a="$e" -v b="$t" 'BEGIN { print (a - b <= 0.3 ? "met" : "NOT MET") }') (peer: srun true; ratio: the difference)")
if [[ ${STARTUP_BENCH_ROWS:-0} = 1 ]]; then
  echo "$row"
  echo "$exec_row"
  echo "   (start-up of the last trial, as rank 0 logs it: $phases)"
  exit 0
fi
echo "srun hostname (whole):         ${hostname_times[*]} s; median $h s"
echo "srun slurm-train to 1st step:  ${first_step_times[*]} s; median $f s"
echo "last trial's phases: $phases"
echo "srun true:                     ${true_times[*]} s; median $t s"
echo "srun slurm-train exec -- true: ${exec_times[*]} s; median $e s"
echo "$row"
echo "$exec_row"
