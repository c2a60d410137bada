#!/usr/bin/env bash
# gpu-check.sh: the CUDA path's checks on a GPU machine, in one command, in under 8 minutes:
#   (a) every CUDA kernel against the CPU reference kernels (cuda-tests; on a GPU a skip fails),
#       and the GPU step against the CPU step (gpu_check train): Fashion-MNIST, 200 steps, fp32
#       (every step's loss within 1e-4 relative) and bf16 (test accuracy within 0.5 points), with
#       dropout 0.2 and 0, and two deterministic bf16 runs with the same final parameters;
#   (b) `slurm-train run` end to end on the GPU with the reference configuration in bf16: final
#       test accuracy and samples/s, beside the CPU path's accuracy from the same seed (within
#       1 point);
#   (c) `slurm-train run`, fp32 and deterministic, on the GPU against the CPU path step by step
#       (losses within 1e-4 relative); a GPU run stopped at step 100 and resumed against an
#       uninterrupted one (final parameters identical, bit for bit); the GPU's checkpoint resumed
#       on the CPU (and saying so);
#   (d) the GEMM-bound MLP (4 layers 4096 x 4096, batch 4096, bf16): the engine's step against
#       PyTorch's and the bf16 matmul ceiling (cuBLASLt, torch.matmul) in the same run (target:
#       60% of the cuBLASLt ceiling); and the whole run's samples/s against PyTorch training the
#       same model on the same data end to end (bench/torch_gpu_mlp.py --run; target 1.5x).
# Prints a table and one "N passed, N failed" line; with $OUT set (the device tool's folder) it
# also writes gpu-check.log and the runs' logs there. Exit 0 when every check passed.
# Runs from a bundle (make gpu-bundle; the machine then needs no MPI, HDF5 or OpenBLAS: a run of
# one process starts no MPI) or from a built source tree (BUILD=build).
#   gpu-check.sh [--data DIR] [--skip-bench] [--work DIR] [--device cuda|cpu]
#     --data DIR     train.h5 and test.h5 (slurm-train data import), or the four IDX files
#     --device cpu   a rehearsal of the script's runs on a machine without a GPU: the runs that
#                    are the GPU's train on the CPU (their verdicts then say nothing of the GPU)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
data="" skip_bench=0 work="" device=cuda
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --skip-bench) skip_bench=1; shift ;;
    --work) work=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument '$1' (expected --data DIR, --skip-bench, --work DIR, --device cuda|cpu)" >&2
       exit 2 ;;
  esac
done
case $device in cuda | cpu) ;; *) echo "gpu-check: --device '$device': expected cuda or cpu" >&2; exit 2 ;; esac
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  exec > >(tee "$OUT/gpu-check.log") 2>&1
fi

# launch PROGRAM: through the bundle's wrapper (its libraries), or the tree's binaries as built.
if [ -x "$HERE/bin/run" ]; then  # a bundle
  launch=("$HERE/bin/run")
  cuda_tests=cuda-tests gpu_check=gpu_check slurm_train=slurm-train
  torch_script=$HERE/torch_gpu_mlp.py reference=$HERE/fashion-mnist.toml
  default_data=$HERE/data/fashion-mnist
else  # a source tree
  ROOT=$(cd "$HERE/.." && pwd)
  BUILD=${BUILD:-$ROOT/build}
  launch=()
  cuda_tests=$BUILD/test/cuda-tests gpu_check=$BUILD/bench/gpu_check slurm_train=$BUILD/bin/slurm-train
  torch_script=$ROOT/bench/torch_gpu_mlp.py reference=$ROOT/examples/fashion-mnist.toml
  default_data=/usr/share/datasets/fashion-mnist
fi
work=${work:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$work"
started=$SECONDS
results=()   # "check|verdict|detail"
failed=0
record() {
  results+=("$1|$2|$3")
  [ "$2" = PASS ] || failed=1
}

echo "== gpu-check on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), work folder $work"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# ---- (a) kernels ----
echo "== (a) CUDA kernels against the CPU reference, and the GPU step against the CPU step"
timeout 180 "${launch[@]}" "$cuda_tests" --no-version 2>&1 |
  tee "$work/cuda-tests.log"
summary=$(grep -E '^\[doctest\] test cases:' "$work/cuda-tests.log" | tail -n1)
if [[ $summary =~ ([0-9]+)\ passed\ \|\ ([0-9]+)\ failed\ \|\ ([0-9]+)\ skipped ]]; then
  detail="${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed, ${BASH_REMATCH[3]} skipped"
  # On the machine this check is for, a skipped kernel test is a failure: no GPU was used.
  if [ "${BASH_REMATCH[2]}" -eq 0 ] && [ "${BASH_REMATCH[3]}" -eq 0 ] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    record "kernels vs CPU reference" PASS "$detail"
  else
    record "kernels vs CPU reference" FAIL "$detail"
  fi
else
  record "kernels vs CPU reference" FAIL "no summary (crash or timeout; see $work/cuda-tests.log)"
fi

if [ -z "$data" ]; then data=$default_data; fi
if [ -f "$data/train.h5" ] && [ -f "$data/test.h5" ]; then
  h5=$data
elif [ -d "$data" ]; then
  h5=$work/data
  "${launch[@]}" "$slurm_train" data import fashion-mnist --from "$data" --out "$h5" >"$work/import.log" 2>&1 ||
    { cat "$work/import.log"; h5=""; }
else
  h5=""
fi
if [ -z "$h5" ]; then
  record "training GPU vs CPU" FAIL "no data: give --data DIR (train.h5/test.h5 or Fashion-MNIST's IDX files)"
else
  for precision in fp32 bf16; do
    for dropout in 0.2 0; do
      name="train $precision dropout $dropout"
      log=$work/train-$precision-$dropout.log
      timeout 150 "${launch[@]}" "$gpu_check" train --data "$h5" --precision "$precision" --dropout "$dropout" \
        --steps 200 >"$log" 2>&1
      status=$?
      cat "$log"
      verdict=$(grep '^verdict' "$log" | tail -n1)
      if [ "$status" -eq 0 ] && [[ $verdict == *PASS* ]]; then
        record "$name" PASS "${verdict#*: PASS: }"
      else
        record "$name" FAIL "${verdict:-exit status $status, no verdict (see $log)}"
      fi
    done
  done
  # The deterministic mode: the same run twice gives the same final parameters, bit for bit.
  for attempt in 1 2; do
    timeout 120 "${launch[@]}" "$gpu_check" train --data "$h5" --precision bf16 --dropout 0 --steps 50 \
      --deterministic >"$work/deterministic-$attempt.log" 2>&1
  done
  crc1=$(sed -n 's/^gpu_params_crc32 //p' "$work/deterministic-1.log")
  crc2=$(sed -n 's/^gpu_params_crc32 //p' "$work/deterministic-2.log")
  if [ -n "$crc1" ] && [ "$crc1" = "$crc2" ]; then
    record "deterministic bf16 x2" PASS "final parameters' CRC-32 $crc1 both times"
  else
    record "deterministic bf16 x2" FAIL "CRC-32 '${crc1:-none}' vs '${crc2:-none}' (see $work/deterministic-*.log)"
  fi
fi

# ---- (b) and (c): slurm-train run, the whole training loop ----
# st_run NAME DEVICE ARGS...: the reference configuration on h5's data; output in $work/NAME.log,
# metrics in $work/NAME.jsonl. Returns the run's exit status.
st_run() {
  local name=$1 on=$2
  shift 2
  rm -f "$work/$name.jsonl"
  timeout "${GPU_CHECK_RUN_TIMEOUT:-240}" "${launch[@]}" "$slurm_train" run --config "$reference" \
    --data.train "$h5/train.h5" --data.test "$h5/test.h5" --train.device "$on" --train.metrics "$work/$name.jsonl" \
    --log-dir "$work/logs" --progress lines "$@" >"$work/$name.log" 2>&1
}
# final_accuracy LOG: "90.12" of the run's "final: test_acc 90.12%" line.
final_accuracy() { sed -n 's/^final: test_acc \([0-9.]*\)%.*/\1/p' "$1" | tail -n1; }
# run_samples_per_s LOG: all epochs' samples over their time (the harmonic mean of the epoch lines').
run_samples_per_s() {
  awk '/^epoch .* samples\/s /{n++; s += 1 / $NF} END {if (n) printf "%.0f", n / s}' "$1"
}
# same_losses A.jsonl B.jsonl REL: every step's loss within REL of each other, relatively.
same_losses() {
  "$PYTHON" - "$@" <<'PY'
import json, sys
a = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r]
b = [r for r in map(json.loads, open(sys.argv[2])) if "step" in r]
rel = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
worst = max(abs(x["loss"] - y["loss"]) / max(abs(y["loss"]), 1e-12) for x, y in zip(a, b))
print(f"{len(a)} steps, worst relative difference {worst:.2e}")
sys.exit(0 if worst <= rel else 1)
PY
}
# same_model A.h5 B.h5: every /model tensor identical, bit for bit.
same_model() {
  "$PYTHON" - "$@" <<'PY'
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    names = sorted(a["model"].keys())
    assert names == sorted(b["model"].keys()), (names, sorted(b["model"].keys()))
    differ = [n for n in names if a["model"][n][...].tobytes() != b["model"][n][...].tobytes()]
print(f"{len(names)} tensors, {len(differ)} differ {differ}")
sys.exit(1 if differ else 0)
PY
}

gpu_run_sps="" gpu_run_acc=""
if [ -n "$h5" ]; then
  echo "== (b) slurm-train run, reference configuration, bf16 on the $device against the CPU path (same seed)"
  st_run run-bf16 "$device" --train.precision bf16
  gpu_status=$?
  st_run run-cpu cpu
  cpu_status=$?
  grep -E '^(  rank|start-up|epoch|final)' "$work/run-bf16.log" "$work/run-cpu.log"
  gpu_run_acc=$(final_accuracy "$work/run-bf16.log") cpu_acc=$(final_accuracy "$work/run-cpu.log")
  gpu_run_sps=$(run_samples_per_s "$work/run-bf16.log") cpu_sps=$(run_samples_per_s "$work/run-cpu.log")
  detail="test accuracy $device bf16 ${gpu_run_acc:-?}% at ${gpu_run_sps:-?} samples/s; CPU ${cpu_acc:-?}% at ${cpu_sps:-?} samples/s"
  if [ "$gpu_status" -eq 0 ] && [ "$cpu_status" -eq 0 ] && [ -n "$gpu_run_acc" ] && [ -n "$cpu_acc" ] &&
     awk -v g="$gpu_run_acc" -v c="$cpu_acc" 'BEGIN {d = g - c; exit !(d <= 1 && d >= -1)}'; then
    record "run bf16 vs CPU accuracy" PASS "$detail"
  else
    record "run bf16 vs CPU accuracy" FAIL "$detail; exit $gpu_status / $cpu_status (see $work/run-*.log)"
  fi

  echo "== (c) slurm-train run, fp32 deterministic, 200 steps: $device against the CPU, step by step"
  st_run det-fp32 "$device" --train.precision fp32 --train.deterministic true --train.steps 200
  gpu_status=$?
  st_run det-cpu cpu --train.steps 200
  cpu_status=$?
  if [ "$gpu_status" -eq 0 ] && [ "$cpu_status" -eq 0 ] &&
     compared=$(same_losses "$work/det-fp32.jsonl" "$work/det-cpu.jsonl" 1e-4); then
    record "run fp32 vs CPU, per step" PASS "$compared (limit 1e-4)"
  else
    record "run fp32 vs CPU, per step" FAIL "${compared:-exit $gpu_status / $cpu_status} (see $work/det-*.log)"
  fi

  echo "== (c) slurm-train run on the $device, stopped at step 100 and resumed, against an uninterrupted run"
  rm -rf "$work/ck" "$work/ck-cpu"
  det=(--train.precision bf16 --train.deterministic true --train.steps 200)
  st_run whole "$device" "${det[@]}" --train.save "$work/whole.h5"
  s1=$?
  st_run stopped "$device" "${det[@]}" --train.stop_after 100 --ckpt.dir "$work/ck"
  s2=$?
  st_run resumed "$device" "${det[@]}" --ckpt.dir "$work/ck" --train.save "$work/resumed.h5"
  s3=$?
  if [ "$s1$s2$s3" = 000 ] && grep -q "resumed from $work/ck/step-00000100.h5" "$work/resumed.log" &&
     compared=$(same_model "$work/whole.h5" "$work/resumed.h5"); then
    record "run stopped+resumed" PASS "final parameters: $compared"
  else
    record "run stopped+resumed" FAIL "${compared:-exit $s1 $s2 $s3, or no resume line} (see $work/whole.log, stopped.log, resumed.log)"
  fi
  # The GPU's checkpoint of step 100, resumed on the CPU: the same file format, and a line that says so.
  mkdir -p "$work/ck-cpu"
  cp "$work/ck/step-00000100.h5" "$work/ck-cpu/"
  st_run on-cpu cpu --train.steps 200 --ckpt.dir "$work/ck-cpu"
  s4=$?
  said=$(grep -o 'the checkpoint was written on .*' "$work/on-cpu.log" | head -n1)
  if [ "$s4" -eq 0 ] && grep -q "resumed from $work/ck-cpu/step-00000100.h5" "$work/on-cpu.log" &&
     { [ "$device" = cpu ] || [ -n "$said" ]; }; then
    record "GPU checkpoint on the CPU" PASS "${said:-resumed (rehearsal: both on the CPU)}"
  else
    record "GPU checkpoint on the CPU" FAIL "exit $s4 (see $work/on-cpu.log)"
  fi
fi

# ---- (d) benchmarks ----
if [ "$skip_bench" -eq 0 ]; then
  echo "== (d) GEMM-bound MLP (4 x 4096 x 4096, batch 4096, bf16): engine, PyTorch, matmul ceiling"
  bench_args=(--precision bf16 --width 4096 --layers 4 --batch 4096 --steps 20 --warmup 5)
  timeout 150 "${launch[@]}" "$gpu_check" bench "${bench_args[@]}" >"$work/bench-engine.log" 2>&1
  engine_status=$?
  timeout 150 "$PYTHON" "$torch_script" "${bench_args[@]}" >"$work/bench-torch.log" 2>&1
  torch_status=$?
  torch_run_status=1
  if [ -n "$h5" ]; then
    timeout 240 "$PYTHON" "$torch_script" --run "$h5" --precision bf16 >"$work/bench-torch-run.log" 2>&1
    torch_run_status=$?
  fi
  cat "$work/bench-engine.log" "$work/bench-torch.log" "$work/bench-torch-run.log" 2>/dev/null
  value() { grep -E "^$1 " "$2" | tail -n1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }
  e=$work/bench-engine.log t=$work/bench-torch.log r=$work/bench-torch-run.log
  torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
  echo
  printf '%-46s %14s %10s %10s\n' "bf16, batch 4096, 4 x 4096^2 Linear" "samples/s" "TFLOP/s" "ms/step"
  printf '%-46s %14s %10s %10s\n' "engine (cuBLASLt epilogues, fused AdamW)" "$(value engine "$e" samples_per_s)" \
    "$(value engine "$e" tflops)" "$(value engine "$e" step_ms)"
  printf '%-46s %14s %10s %10s\n' "PyTorch $torch_version autocast" \
    "$(value torch "$t" samples_per_s)" "$(value torch "$t" tflops)" "$(value torch "$t" step_ms)"
  printf '%-46s %14s %10s\n' "bf16 matmul ceiling, cuBLASLt" "" "$(value ceiling "$e" tflops)"
  printf '%-46s %14s %10s\n' "bf16 matmul ceiling, torch.matmul" "" "$(value torch_ceiling "$t" tflops)"
  echo
  printf '%-46s %14s %14s\n' "reference configuration, 15 epochs, bf16" "samples/s" "test accuracy"
  printf '%-46s %14s %14s\n' "slurm-train run ($device)" "${gpu_run_sps:-?}" "${gpu_run_acc:-?}%"
  printf '%-46s %14s %14s\n' "PyTorch $torch_version, data in GPU memory" "$(value torch_run "$r" samples_per_s)" \
    "$(value torch_run "$r" test_accuracy)%"
  if [ "$engine_status" -eq 0 ] && [ "$torch_status" -eq 0 ]; then
    record "benchmark" PASS "engine $(value engine "$e" tflops) TFLOP/s, PyTorch $(value torch "$t" tflops), ceiling $(value ceiling "$e" tflops)"
    share=$(awk -v a="$(value engine "$e" tflops)" -v c="$(value ceiling "$e" tflops)" 'BEGIN {if (c > 0) printf "%.0f", 100 * a / c}')
    if [ -n "$share" ] && [ "$share" -ge 60 ]; then
      record "MLP >= 60% of the ceiling" PASS "$share% of the cuBLASLt bf16 ceiling"
    else
      record "MLP >= 60% of the ceiling" FAIL "${share:-?}% of the cuBLASLt bf16 ceiling"
    fi
  else
    record "benchmark" FAIL "engine exit $engine_status, PyTorch exit $torch_status (see $work/bench-*.log)"
  fi
  torch_sps=$(value torch_run "$r" samples_per_s)
  ratio=$(awk -v a="$gpu_run_sps" -v b="$torch_sps" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b}')
  if [ "$torch_run_status" -eq 0 ] && [ -n "$ratio" ] && awk -v x="$ratio" 'BEGIN {exit !(x >= 1.5)}'; then
    record "run >= 1.5x PyTorch" PASS "${ratio}x ($gpu_run_sps vs $torch_sps samples/s)"
  else
    record "run >= 1.5x PyTorch" FAIL "${ratio:-?}x (${gpu_run_sps:-?} vs ${torch_sps:-?} samples/s; PyTorch exit $torch_run_status)"
  fi
fi

echo
echo "== gpu-check summary ($((SECONDS - started)) s)"
passed=0 failures=0
for r in "${results[@]}"; do
  IFS='|' read -r check verdict detail <<<"$r"
  printf '%-30s %-5s %s\n' "$check" "$verdict" "$detail"
  if [ "$verdict" = PASS ]; then passed=$((passed + 1)); else failures=$((failures + 1)); fi
done
echo "$passed passed, $failures failed"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  mkdir -p "$OUT/gpu-check-logs"
  cp "$work"/*.log "$work"/*.jsonl "$OUT/gpu-check-logs/" 2>/dev/null
fi
exit $failed
