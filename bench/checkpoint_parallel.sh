#!/usr/bin/env bash
# checkpoint_parallel.sh: on the local Slurm cluster (two nodes), the write of one checkpoint of
# sharded optimizer state by all ranks together (build/bench/checkpoint_parallel: each rank its
# shard straight to its place in the file) against rank 0's serial write of the
# same state, alternately in one run: srun --mpi=pmix -N2 -n4. Prints one table row (the medians of CKPT_PAR_REPEATS,
# default 3, of a CKPT_PAR_MB = 256 MB checkpoint written into CKPT_PAR_DIR, default under the
# build tree). The local cluster's two nodes share this machine's one disk: the row shows what
# the parallel path costs or saves there, not the bandwidth of several nodes' file servers.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/results.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
MB=${CKPT_PAR_MB:-256}
REPEATS=${CKPT_PAR_REPEATS:-3}
PORT=${CKPT_PAR_PORT:-6957}  # neither the demo's (6917), the tests' (6937) nor startup.sh's (6927)
DIR=$BUILD/bench/cluster-ckpt
OUT=${CKPT_PAR_DIR:-$BUILD/bench/ckpt-parallel}
cd "$ROOT"
rm -rf "$OUT"
mkdir -p "$OUT"
plugin=$BUILD/lib/spank_train.so
[[ -f $plugin ]] || plugin=none
scripts/cluster.sh start --dir "$DIR" --port "$PORT" --nodes 2 --plugin "$plugin" >/dev/null
trap 'scripts/cluster.sh stop --dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
eval "$(scripts/cluster.sh env --dir "$DIR")"

out=$(srun --mpi=pmix -N2 -n4 "$BUILD/bench/checkpoint_parallel" "$OUT" "$MB" "$REPEATS")
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$out"; }
p=$(field parallel_s) s=$(field serial_s)
bench_record ckpt_sharded "$p" "$s"
read -r target verdict <<<"$(bench_verdict ckpt_sharded "$p" "$s" | sed 's/^\([<>]=\) /\1/')"
printf '%-52s %12.3f %12.3f %8s %8s  %s\n' "checkpoint write, $(field MB) MB sharded, $(field ranks) ranks/$(field nodes) nodes, s" \
  "$p" "$s" "$(awk -v a="$s" -v b="$p" 'BEGIN { printf "%.2fx", a / b }')" "$target" \
  "$verdict (peer: rank 0's serial write; ratio: speed-up; $(field parallel_MBps) against $(field serial_MBps) MB/s; one shared disk)"
