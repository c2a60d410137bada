#!/usr/bin/env bash
# gpu-check.sh: the CUDA path's checks on a GPU machine, in one command, in under 8 minutes:
#   (a) every CUDA kernel against the CPU reference kernels (cuda-tests; on a GPU a skip fails);
#   (b) Fashion-MNIST, 200 steps, the GPU step against the CPU path from the same seed, in fp32
#       (every step's loss within 1e-4 relative) and bf16 (final test accuracy within 0.5
#       points), each with dropout 0.2 (element-wise bias/activation) and 0 (fused epilogues);
#       and the deterministic mode: two runs, the same final parameters bit for bit;
#   (c) a GEMM-bound MLP (4 layers 4096 x 4096, batch 4096, bf16): samples/s and TFLOP/s of the
#       engine's step and of PyTorch's (autocast bf16, fused AdamW) on the same GPU, and the
#       bf16 matmul ceiling (cuBLASLt and torch.matmul) measured in the same run.
# Runs from a bundle (make gpu-bundle; the machine then needs no MPI, HDF5 or OpenBLAS) or from
# a built source tree (BUILD=build).
#   gpu-check.sh [--data DIR] [--skip-bench] [--work DIR]
#     --data DIR   train.h5 and test.h5 (slurm-train data import), or the four IDX files
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
data="" skip_bench=0 work=""
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --skip-bench) skip_bench=1; shift ;;
    --work) work=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument '$1' (expected --data DIR, --skip-bench, --work DIR)" >&2; exit 2 ;;
  esac
done

# launch PROGRAM: through the bundle's wrapper (its libraries), or the tree's binaries as built.
if [ -x "$HERE/bin/run" ]; then  # a bundle
  launch=("$HERE/bin/run")
  cuda_tests=cuda-tests gpu_check=gpu_check slurm_train=slurm-train
  torch_script=$HERE/torch_gpu_mlp.py
  default_data=$HERE/data/fashion-mnist
else  # a source tree
  ROOT=$(cd "$HERE/.." && pwd)
  BUILD=${BUILD:-$ROOT/build}
  launch=()
  cuda_tests=$BUILD/test/cuda-tests gpu_check=$BUILD/bench/gpu_check slurm_train=$BUILD/bin/slurm-train
  torch_script=$ROOT/bench/torch_gpu_mlp.py
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
echo "== (a) CUDA kernels against the CPU reference"
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

# ---- (b) training, GPU against CPU ----
echo "== (b) Fashion-MNIST, 200 steps, GPU step against the CPU path"
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

# ---- (c) benchmark ----
if [ "$skip_bench" -eq 0 ]; then
  echo "== (c) GEMM-bound MLP (4 x 4096 x 4096, batch 4096, bf16): engine, PyTorch, matmul ceiling"
  bench_args=(--precision bf16 --width 4096 --layers 4 --batch 4096 --steps 20 --warmup 5)
  timeout 150 "${launch[@]}" "$gpu_check" bench "${bench_args[@]}" >"$work/bench-engine.log" 2>&1
  engine_status=$?
  timeout 150 "$PYTHON" "$torch_script" "${bench_args[@]}" >"$work/bench-torch.log" 2>&1
  torch_status=$?
  cat "$work/bench-engine.log" "$work/bench-torch.log"
  value() { grep -E "^$1 " "$2" | tail -n1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }
  e=$work/bench-engine.log t=$work/bench-torch.log
  echo
  printf '%-38s %14s %10s %10s\n' "bf16, batch 4096, 4 x 4096^2 Linear" "samples/s" "TFLOP/s" "ms/step"
  printf '%-38s %14s %10s %10s\n' "engine (cuBLASLt epilogues, fused AdamW)" "$(value engine "$e" samples_per_s)" \
    "$(value engine "$e" tflops)" "$(value engine "$e" step_ms)"
  printf '%-38s %14s %10s %10s\n' "PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) autocast" \
    "$(value torch "$t" samples_per_s)" "$(value torch "$t" tflops)" "$(value torch "$t" step_ms)"
  printf '%-38s %14s %10s\n' "bf16 matmul ceiling, cuBLASLt" "" "$(value ceiling "$e" tflops)"
  printf '%-38s %14s %10s\n' "bf16 matmul ceiling, torch.matmul" "" "$(value torch_ceiling "$t" tflops)"
  if [ "$engine_status" -eq 0 ] && [ "$torch_status" -eq 0 ]; then
    record "benchmark" PASS "engine $(value engine "$e" tflops) TFLOP/s, PyTorch $(value torch "$t" tflops), ceiling $(value ceiling "$e" tflops)"
  else
    record "benchmark" FAIL "engine exit $engine_status, PyTorch exit $torch_status (see $work/bench-*.log)"
  fi
fi

echo
echo "== gpu-check summary ($((SECONDS - started)) s)"
for r in "${results[@]}"; do
  IFS='|' read -r check verdict detail <<<"$r"
  printf '%-28s %-5s %s\n' "$check" "$verdict" "$detail"
done
exit $failed
