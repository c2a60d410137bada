#!/usr/bin/env bash
# checkpoint.sh: checkpoint bandwidth against dd on the same filesystem in the same run, and the
# training stall per asynchronous save. Prints one table.
#   CKPT_BENCH_DIR   folder to write in (default build/bench/ckpt-io; put it on the storage
#                    you care about, e.g. the cluster's shared file system)
#   CKPT_BENCH_MB    checkpoint size in MB (default 256), CKPT_BENCH_REPEATS (default 3)
# Write: our checkpoint (HDF5 structure, CRC-32 of every dataset, data, fsync, rename, folder
# fsync, `latest`) against `dd if=/dev/zero bs=1M conv=fsync` of the same size. Read: our
# verified read (every CRC checked) against `dd of=/dev/null`, both cold (the file's pages
# dropped first: posix_fadvise in ours, dd iflag=nocache count=0 for dd). Ours reads as a resume
# does, into the run's buffers, which exist already, and into new buffers (what `ckpt show` and
# a fresh process's resume do); `ckpt verify` reads cold too. Medians of the repeats. Each figure
# is recorded for make bench's comparison (bench/results.sh) and judged against its target in
# bench/targets.tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/results.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
DIR=${CKPT_BENCH_DIR:-$BUILD/bench/ckpt-io}
MB=${CKPT_BENCH_MB:-256}
REPEATS=${CKPT_BENCH_REPEATS:-3}
mkdir -p "$DIR"
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Ours and dd alternate, so that the machine's other load and the page cache's state weigh on
# both alike.
declare -A ours
our_w=() our_r=() our_u=() our_m=() our_v=() dd_w=() dd_r=()
for _ in $(seq "$REPEATS"); do
  while read -r key value; do ours[$key]=$value; done < <("$BUILD/bench/checkpoint_io" "$DIR/ours" "$MB" 1)
  our_w+=("${ours[write_MBps]}") our_r+=("${ours[read_MBps]}") our_u+=("${ours[fresh_read_MBps]}")
  our_m+=("${ours[model_read_MBps]}")
  our_v+=("${ours[verify_MBps]}")
  bytes=${ours[file_bytes]}
  mib=$(( (bytes + (1 << 20) - 1) >> 20 ))
  t0=$(now); dd if=/dev/zero of="$DIR/dd.bin" bs=1M count="$mib" conv=fsync status=none; t1=$(now)
  dd_w+=("$(echo "$t1 - $t0" | bc -l)")
  dd if="$DIR/dd.bin" iflag=nocache count=0 status=none
  t0=$(now); dd if="$DIR/dd.bin" of=/dev/null bs=1M status=none; t1=$(now)
  dd_r+=("$(echo "$t1 - $t0" | bc -l)")
  rm -f "$DIR/dd.bin"
done
ours[write_MBps]=$(printf '%s\n' "${our_w[@]}" | median)
ours[read_MBps]=$(printf '%s\n' "${our_r[@]}" | median)
ours[fresh_read_MBps]=$(printf '%s\n' "${our_u[@]}" | median)
ours[model_read_MBps]=$(printf '%s\n' "${our_m[@]}" | median)
ours[verify_MBps]=$(printf '%s\n' "${our_v[@]}" | median)
dd_bytes=$((mib << 20))
dd_wbw=$(printf '%s\n' "${dd_w[@]}" | median | awk -v b="$dd_bytes" '{ printf "%.0f", b / $1 / 1e6 }')
dd_rbw=$(printf '%s\n' "${dd_r[@]}" | median | awk -v b="$dd_bytes" '{ printf "%.0f", b / $1 / 1e6 }')

# The stall: the reference model (1024-512 MLP, 1.3 M parameters, a 16 MB checkpoint) with a
# checkpoint every 10 steps; "training stalled X ms" is what each save cost the training loop
# (waiting for the previous write + waiting, before the next optimizer update, for the copy to
# host memory that the writer thread makes during that step's forward and backward). The same
# run without checkpoints gives the step time they cost in all (the writer thread shares the
# CPUs with training).
data=$BUILD/test/data/fashion-mnist
[ -f "$data/train.h5" ] || "$BUILD/bin/slurm-train" data import fashion-mnist --out "$data" >/dev/null
train_log=$DIR/train.log
rm -rf "$DIR/train" "$DIR/m.jsonl"
"$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$data/train.h5" \
  --data.test "$data/test.h5" --train.steps 100 --train.eval_batch 2000 --ckpt.dir "$DIR/train" --ckpt.every 10 \
  --train.metrics "$DIR/m.jsonl" >"$train_log"
"$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$data/train.h5" \
  --data.test "$data/test.h5" --train.steps 100 --train.eval_batch 2000 --train.metrics "$DIR/m0.jsonl" >/dev/null
stalls=$(sed -n 's/.*training stalled \([0-9.]*\) ms.*/\1/p' "$train_log")
stall_median=$(echo "$stalls" | median)
stall_max=$(echo "$stalls" | sort -g | tail -n 1)
step_ms() {
  /usr/bin/python3 -c "
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'time_s' in r]
print('%.2f' % (1e3 * statistics.median(sum(r['time_s'].values()) for r in rows)))" "$1"
}
mean_step_ms() {
  /usr/bin/python3 -c "
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'time_s' in r]
print('%.2f' % (1e3 * statistics.mean(sum(r['time_s'].values()) for r in rows)))" "$1"
}
step_ms=$(step_ms "$DIR/m.jsonl")
ckpt_mb=$(du -m "$DIR/train/step-00000100.h5" | cut -f1)

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
bench_record ckpt_write "${ours[write_MBps]}" "$dd_wbw"
bench_record ckpt_read "${ours[read_MBps]}" "$dd_rbw"
bench_record ckpt_read_fresh "${ours[fresh_read_MBps]}" "$dd_rbw"
bench_record ckpt_read_model "${ours[model_read_MBps]}" "$dd_rbw"
bench_record ckpt_verify "${ours[verify_MBps]}" "$dd_rbw"
bench_record ckpt_stall "$stall_median" "$step_ms"
if [ "${CKPT_BENCH_ROWS:-0}" = 1 ]; then
  # Rows for bench/run.sh's table: measurement, ours, peer, ratio, target, verdict.
  row() {
    local key=$1 what=$2 value=$3 peer=$4 note=$5 target verdict
    read -r target verdict <<<"$(bench_verdict "$key" "$value" "$peer" | sed 's/^\([<>]=\) /\1/')"
    printf '%-52s %12s %12s %8s %8s  %s\n' "$what" "$value" "$peer" "$(pct "$value" "$peer")" "$target" "$verdict $note"
  }
  row ckpt_write "checkpoint write MB/s ($((bytes / 1000000)) MB, fsync+rename)" "${ours[write_MBps]}" "$dd_wbw" "(peer: dd conv=fsync)"
  row ckpt_read "checkpoint read MB/s, cold, every CRC verified" "${ours[read_MBps]}" "$dd_rbw" "(peer: dd)"
  row ckpt_read_fresh "  the same into new buffers" "${ours[fresh_read_MBps]}" "$dd_rbw" "(peer: dd; no command reads so)"
  row ckpt_read_model "  sample's and serve's read (the model's third)" "${ours[model_read_MBps]}" "$dd_rbw" "(peer: dd; the whole file's MB)"
  row ckpt_verify "ckpt verify MB/s, cold" "${ours[verify_MBps]}" "$dd_rbw" "(peer: dd)"
  row ckpt_stall "stall per async save, ms (median; step ${step_ms} ms)" "$stall_median" "$step_ms" "(peer: one step)"
  rm -rf "$DIR"
  exit 0
fi
echo "== checkpoints on $(df -P "$DIR" | awk 'NR == 2 { print $1 }') ($(stat -f -c %T "$DIR")), $((bytes / 1000000)) MB file, median of $REPEATS"
printf '%-44s %10s %10s %8s\n' "" "ours MB/s" "dd MB/s" "ratio"
printf '%-44s %10s %10s %8s\n' "write (incl. fsync, rename, folder fsync)" "${ours[write_MBps]}" "$dd_wbw" "$(pct "${ours[write_MBps]}" "$dd_wbw")"
printf '%-44s %10s %10s %8s\n' "read, cold (every CRC-32 verified), as a resume" "${ours[read_MBps]}" "$dd_rbw" "$(pct "${ours[read_MBps]}" "$dd_rbw")"
printf '%-44s %10s %10s %8s\n' "  the same into new buffers" "${ours[fresh_read_MBps]}" "$dd_rbw" "$(pct "${ours[fresh_read_MBps]}" "$dd_rbw")"
printf '%-44s %10s %10s %8s\n' "  sample's and serve's read (model's third)" "${ours[model_read_MBps]}" "$dd_rbw" "$(pct "${ours[model_read_MBps]}" "$dd_rbw")"
printf '%-44s %10s %10s %8s\n' "ckpt verify, cold" "${ours[verify_MBps]}" "$dd_rbw" "$(pct "${ours[verify_MBps]}" "$dd_rbw")"
echo "== training stall per async save: 1024-512 MLP, ${ckpt_mb} MB checkpoints every 10 steps"
printf '%-44s %10s ms (max %s ms)\n' "stall per save (median of $(echo "$stalls" | wc -l))" "$stall_median" "$stall_max"
printf '%-44s %10s ms\n' "median step" "$step_ms"
printf '%-44s %10s\n' "stall / step" "$(pct "$stall_median" "$step_ms")"
printf '%-44s %10s ms, without checkpoints %s ms\n' "mean step with a save every 10 steps" "$(mean_step_ms "$DIR/m.jsonl")" "$(mean_step_ms "$DIR/m0.jsonl")"
rm -rf "$DIR"
