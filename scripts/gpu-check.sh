#!/usr/bin/env bash
# gpu-check.sh: the CUDA path's checks on a GPU machine, in one command, in under 8 minutes:
#   (a) every CUDA kernel against the CPU reference kernels (cuda-tests; on a GPU a skip fails),
#       and the GPU step against the CPU step (gpu_check train): Fashion-MNIST, 200 steps, fp32
#       (the first 20 steps' losses within 1e-5 relative, then test accuracy within 0.5 points:
#       AdamW amplifies rounding differences past the first steps, the CPU path's own too) and
#       bf16 (test accuracy within 0.5 points), with dropout 0.2 and 0, and two deterministic
#       bf16 runs with the same final parameters;
#   (b) `slurm-train run` end to end on the GPU with the reference configuration in bf16: final
#       test accuracy and samples/s, beside the CPU path's accuracy from the same seed (within
#       1 point);
#   (c) `slurm-train run`, fp32 and deterministic, on the GPU against the CPU path step by step
#       (the first 20 steps' losses within 1e-5 relative, then test accuracy within 1 point); a
#       GPU run stopped at step 100 and resumed against an uninterrupted one (final parameters
#       identical, bit for bit); the GPU's checkpoint resumed
#       on the CPU (and saying so); and the GPT (examples/gpt-tiny.toml on the fortunes corpus's
#       tokens, 200 steps): bf16 on the GPU learns (validation bits per byte under 0.8 x the
#       unigram entropy), fp32 deterministic against the CPU step by step (losses within 1e-3
#       relative), stopped at step 100 and resumed (the same bits), `slurm-train sample
#       --device cuda` from its checkpoint against the CPU's greedy text, and `slurm-train serve
#       --device cuda`'s /generate against sample's; and GPT-2 124M's GPU
#       step against its CPU step, 3 steps of 2 x 1024 tokens (gpu_check gpt-vs-cpu; losses within
#       1e-4 relative in fp32, 2e-2 in bf16);
#   (d) the GEMM-bound MLP (4 layers 4096 x 4096, batch 4096, bf16): the engine's step against
#       PyTorch's and the bf16 matmul ceiling (cuBLASLt, torch.matmul) in the same run (target:
#       60% of the cuBLASLt ceiling); and the whole run's samples/s against PyTorch training the
#       same model on the same data end to end (bench/torch_gpu_mlp.py --run; target 1.5x);
#   (e) GPT-2 124M (bf16, batch 8 x 1024 tokens): the engine's training step (gpu_check gpt)
#       against PyTorch's, eager and torch.compile (bench/torch_gpt_gpu.py): tokens/s and MFU
#       (6N + 12LCT FLOPs per token over the GPU's dense bf16 peak); targets: tokens/s at least
#       PyTorch eager's, MFU at least 40%; and both sides' GPU time per step by kernel (CUPTI,
#       torch.profiler). Skipped under --device cpu (a 124M GPT is the GPU's).
#   (f) slurm-train's GPU telemetry (what each rank samples through NVML) against nvidia-smi for
#       30 s under load (gpu_check telemetry): utilisation within 10 points, power within 5%, the
#       energy counter within 2% of the integrated power.
#   (g) the TensorBoard event files of a run on the GPU (train.tensorboard, histograms every 100
#       steps) read by TensorBoard's own event reader (PyTorch's packages bring it) give the same
#       tags, steps and values as test/integration/tensorboard_events.py, the decoder make test uses;
#       after a crash and a resume, TensorBoard's own view shows each step once, as that decoder's
#       --shown does.
# Runs (a)'s kernels first, then (e), the GPT's runs, (f), and the MLP's last: a call cut short loses
# the least. Prints each verdict as it comes, then a table and one "N passed, N failed" line; with
# $OUT set (the device tool's folder) it also writes gpu-check.log and gpu-check-logs.tar.gz (the
# runs' logs and metrics) there. Exit 0 when every check passed.
# Runs from a bundle (make gpu-bundle; the machine then needs no MPI, HDF5 or OpenBLAS: a run of
# one process starts no MPI) or from a built source tree (BUILD=build).
#   gpu-check.sh [--data DIR] [--skip-bench] [--work DIR] [--device cuda|cpu]
#     --data DIR     train.h5 and test.h5 (slurm-train data import), or the four IDX files
#     --tokens FILE  the GPT's token dataset (default: the bundle's data/fortunes/tokens.h5, or
#                    `slurm-train data import fortunes` here when the fortunes package is installed)
#     --skip-bench   without (d) and (e)
#     --only LIST    only these sections, comma-separated, in the usual order (a short lease):
#                    kernels, gpt-bench, gpt-vs-cpu, gpt-runs, telemetry, tensorboard, mlp-step,
#                    mlp-runs, mlp-bench
#     --device cpu   a rehearsal of the script's runs on a machine without a GPU: the runs that
#                    are the GPU's train on the CPU (their verdicts then say nothing of the GPU)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
data="" tokens="" skip_bench=0 work="" device=cuda only=""
sections="kernels gpt-bench gpt-vs-cpu gpt-runs telemetry tensorboard mlp-step mlp-runs mlp-bench"
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --skip-bench) skip_bench=1; shift ;;
    --work) work=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument '$1' (expected --data DIR, --tokens FILE, --skip-bench, --only LIST, --work DIR, --device cuda|cpu)" >&2
       exit 2 ;;
  esac
done
case $device in cuda | cpu) ;; *) echo "gpu-check: --device '$device': expected cuda or cpu" >&2; exit 2 ;; esac
for section in ${only//,/ }; do
  case " $sections " in
    *" $section "*) ;;
    *) echo "gpu-check: --only: unknown section '$section' (expected some of: ${sections// /, })" >&2; exit 2 ;;
  esac
done
# Whether a section runs: every one, or those --only names.
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  exec > >(tee "$OUT/gpu-check.log") 2>&1
fi

# launch PROGRAM: through the bundle's wrapper (its libraries), or the tree's binaries as built.
if [ -x "$HERE/bin/run" ]; then  # a bundle
  launch=("$HERE/bin/run")
  cuda_tests=cuda-tests gpu_check=gpu_check slurm_train=slurm-train
  torch_script=$HERE/torch_gpu_mlp.py torch_gpt_script=$HERE/torch_gpt_gpu.py reference=$HERE/fashion-mnist.toml
  default_data=$HERE/data/fashion-mnist gpt_tiny=$HERE/gpt-tiny.toml default_tokens=$HERE/data/fortunes/tokens.h5
  tb_decoder=$HERE/tensorboard_events.py
else  # a source tree
  ROOT=$(cd "$HERE/.." && pwd)
  BUILD=${BUILD:-$ROOT/build}
  launch=()
  cuda_tests=$BUILD/test/cuda-tests gpu_check=$BUILD/bench/gpu_check slurm_train=$BUILD/bin/slurm-train
  torch_script=$ROOT/bench/torch_gpu_mlp.py torch_gpt_script=$ROOT/bench/torch_gpt_gpu.py
  reference=$ROOT/examples/fashion-mnist.toml
  default_data=/usr/share/datasets/fashion-mnist gpt_tiny=$ROOT/examples/gpt-tiny.toml default_tokens=
  tb_decoder=$ROOT/test/integration/tensorboard_events.py
fi
work=${work:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$work"
started=$SECONDS
results=()   # "check|verdict|detail"
failed=0
record() {
  results+=("$1|$2|$3")
  echo "-- $1: $2 $3"  # as it comes, for a call cut short before the summary
  [ "$2" = PASS ] || failed=1
}

echo "== gpu-check on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), work folder $work"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# verdict_of CHECK LOG SECONDS ARGS...: gpu_check ARGS (within SECONDS) into LOG, shown, and
# recorded as CHECK by its "verdict ...: PASS|FAIL: detail" line and its exit status.
verdict_of() {
  local check=$1 log=$2 seconds=$3 status verdict
  shift 3
  timeout "$seconds" "${launch[@]}" "$gpu_check" "$@" >"$log" 2>&1
  status=$?
  cat "$log"
  verdict=$(grep '^verdict' "$log" | tail -n1)
  if [ "$status" -eq 0 ] && [[ $verdict == *PASS* ]]; then
    record "$check" PASS "${verdict#*: PASS: }"
  else
    record "$check" FAIL "${verdict:-exit status $status, no verdict (see $log)}"
  fi
}

# (a) the kernels against the CPU reference kernels.
check_kernels() {
  echo "== (a) CUDA kernels against the CPU reference"
  timeout 120 "${launch[@]}" "$cuda_tests" --no-version 2>&1 |
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
}

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
# (a) the MLP step on the GPU against the CPU step.
check_mlp_step() {
  echo "== (a) the MLP's GPU step against its CPU step (gpu_check train)"
  if [ -z "$h5" ]; then
    record "training GPU vs CPU" FAIL "no data: give --data DIR (train.h5/test.h5 or Fashion-MNIST's IDX files)"
  else
    for precision in fp32 bf16; do
      for dropout in 0.2 0; do
        verdict_of "train $precision dropout $dropout" "$work/train-$precision-$dropout.log" 150 \
          train --data "$h5" --precision "$precision" --dropout "$dropout" --steps 200
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
}

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
# same_losses A.jsonl B.jsonl REL [STEPS]: every step's loss (the first STEPS' only, if given)
# within REL of each other, relatively; the worst of all steps is printed either way.
same_losses() {
  "$PYTHON" - "$@" <<'PY'
import json, sys
a = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
b = [r for r in map(json.loads, open(sys.argv[2])) if "loss" in r]
rel = float(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else len(a)
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
diffs = [abs(x["loss"] - y["loss"]) / max(abs(y["loss"]), 1e-12) for x, y in zip(a, b)]
bounded = max(diffs[:first])
if first < len(a):
    print(f"first {first} of {len(a)} steps within {bounded:.2e}; all steps within {max(diffs):.2e}")
else:
    print(f"{len(a)} steps, worst relative difference {bounded:.2e}")
sys.exit(0 if bounded <= rel else 1)
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
# (b) and (c): the MLP through slurm-train run.
check_mlp_runs() {
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
    # The first 20 steps to rounding; later, AdamW amplifies rounding differences about 30-fold
    # every 10 steps (the CPU path's own with another OpenBLAS kernel too), so the final test
    # accuracy, within a point, bounds the rest.
    det_gpu_acc=$(final_accuracy "$work/det-fp32.log") det_cpu_acc=$(final_accuracy "$work/det-cpu.log")
    if [ "$gpu_status" -eq 0 ] && [ "$cpu_status" -eq 0 ] &&
       compared=$(same_losses "$work/det-fp32.jsonl" "$work/det-cpu.jsonl" 1e-5 20) &&
       awk -v g="$det_gpu_acc" -v c="$det_cpu_acc" 'BEGIN {d = g - c; exit !(g != "" && d <= 1 && d >= -1)}'; then
      record "run fp32 vs CPU, per step" PASS "$compared (limit 1e-5); test accuracy $det_gpu_acc% vs $det_cpu_acc%"
    else
      record "run fp32 vs CPU, per step" FAIL "${compared:-exit $gpu_status / $cpu_status}; test accuracy ${det_gpu_acc:-?}% vs ${det_cpu_acc:-?}% (see $work/det-*.log)"
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
}

# ---- (c) the GPT through slurm-train run ----
if [ -z "$tokens" ] && [ -n "$default_tokens" ] && [ -f "$default_tokens" ]; then tokens=$default_tokens; fi
if [ -z "$tokens" ]; then
  "${launch[@]}" "$slurm_train" data import fortunes --out "$work/fortunes" >"$work/import-fortunes.log" 2>&1 &&
    tokens=$work/fortunes/tokens.h5
fi
# gt_run NAME DEVICE ARGS...: gpt-tiny, 200 steps of 16 windows, on the tokens; as st_run. Its
# checkpoints go to $work/NAME-ck unless ARGS name a --ckpt.dir (the configuration's own folder
# is relative, and a run would resume another's).
gt_run() {
  local name=$1 on=$2
  shift 2
  rm -f "$work/$name.jsonl"
  [[ " $* " == *" --ckpt.dir "* ]] || set -- "$@" --ckpt.dir "$work/$name-ck"
  rm -rf "$work/$name-ck"
  timeout "${GPU_CHECK_RUN_TIMEOUT:-240}" "${launch[@]}" "$slurm_train" run --config "$gpt_tiny" \
    --data.train "$tokens" --data.test "$tokens" --train.device "$on" --train.metrics "$work/$name.jsonl" \
    --train.global_batch 16 --train.steps 200 --train.warmup_steps 20 --train.log_every 50 \
    --log-dir "$work/logs" --progress lines "$@" >"$work/$name.log" 2>&1
}
# (c) the GPT through slurm-train run.
check_gpt_runs() {
  if [ -z "$tokens" ] || [ ! -f "$tokens" ]; then
    record "GPT run" FAIL "no token dataset: give --tokens FILE (slurm-train data import fortunes --out DIR)"
  else
    echo "== (c) the GPT (gpt-tiny, 200 steps) through slurm-train run on the $device"
    gt_run gpt-bf16 "$device" --train.precision bf16 --ckpt.dir "$work/gpt-ck"
    s1=$?
    grep -E '^(  rank|epoch|final)' "$work/gpt-bf16.log"
    bpb=$(sed -n 's/^final: .*val_loss [0-9.]* (\([0-9.]*\) bits\/byte).*/\1/p' "$work/gpt-bf16.log" | tail -n1)
    unigram=$(grep -o 'unigram entropy [0-9.]*' "$work/gpt-bf16.log" | tail -n1 | awk '{print $3}')
    detail="validation ${bpb:-?} bits/byte, unigram entropy ${unigram:-?}"
    if [ "$s1" -eq 0 ] && [ -n "$bpb" ] && [ -n "$unigram" ] && awk -v b="$bpb" -v u="$unigram" 'BEGIN {exit !(b < 0.8 * u)}'; then
      record "GPT run bf16 learns" PASS "$detail"
    else
      record "GPT run bf16 learns" FAIL "$detail; exit $s1 (see $work/gpt-bf16.log)"
    fi
    # fp32 against the CPU: the same initial parameters, batches and masks; the steps differ by
    # summation order alone, which AdamW's 200 steps amplify: 1e-3 relative is a bound, not a
    # measurement (the MLP's is 1e-4).
    gt_run gpt-fp32 "$device" --train.precision fp32 --train.deterministic true
    s1=$?
    gt_run gpt-cpu cpu
    s2=$?
    if [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && compared=$(same_losses "$work/gpt-fp32.jsonl" "$work/gpt-cpu.jsonl" 1e-3); then
      record "GPT run fp32 vs CPU" PASS "$compared (limit 1e-3)"
    else
      record "GPT run fp32 vs CPU" FAIL "${compared:-exit $s1 / $s2} (see $work/gpt-fp32.log, gpt-cpu.log)"
    fi
    det=(--train.precision bf16 --train.deterministic true)
    rm -rf "$work/gpt-stop-ck"
    gt_run gpt-whole "$device" "${det[@]}" --train.save "$work/gpt-whole.h5"
    s1=$?
    gt_run gpt-stopped "$device" "${det[@]}" --train.stop_after 100 --ckpt.dir "$work/gpt-stop-ck"
    s2=$?
    gt_run gpt-resumed "$device" "${det[@]}" --ckpt.dir "$work/gpt-stop-ck" --train.save "$work/gpt-resumed.h5"
    s3=$?
    compared=""
    if [ "$s1$s2$s3" = 000 ] && grep -q "resumed from $work/gpt-stop-ck/step-00000100.h5" "$work/gpt-resumed.log" &&
       compared=$(same_model "$work/gpt-whole.h5" "$work/gpt-resumed.h5"); then
      record "GPT run stopped+resumed" PASS "final parameters: $compared"
    else
      record "GPT run stopped+resumed" FAIL "${compared:-exit $s1 $s2 $s3, or no resume line} (see $work/gpt-whole.log, gpt-stopped.log, gpt-resumed.log)"
    fi
    # Sampling from the bf16 run's checkpoint on the GPU, against the CPU's greedy text (they may
    # part at a near tie: the logits differ by rounding).
    gpu_text=$(timeout 60 "${launch[@]}" "$slurm_train" sample "$work/gpt-ck" --prompt "The " --tokens 120 \
      --temperature 0 --quiet --device "$device" 2>"$work/sample-gpu.log")
    s1=$?
    cpu_text=$(timeout 60 "${launch[@]}" "$slurm_train" sample "$work/gpt-ck" --prompt "The " --tokens 120 \
      --temperature 0 --quiet --device cpu 2>"$work/sample-cpu.log")
    s2=$?
    printf 'GPU: %s\nCPU: %s\n' "$gpu_text" "$cpu_text"
    if [ "$gpu_text" = "$cpu_text" ]; then
      same="identical to the CPU's"
    else
      n=0
      while [ "$n" -lt "${#cpu_text}" ] && [ "${gpu_text:n:1}" = "${cpu_text:n:1}" ]; do n=$((n + 1)); done
      same="the CPU's for its first $n of ${#cpu_text} bytes"
    fi
    if [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && [[ $gpu_text == "The "* ]] && [ "${#gpu_text}" -ge 120 ]; then
      record "GPT sample on the $device" PASS "greedy text $same"
    else
      record "GPT sample on the $device" FAIL "exit $s1 / $s2 (see $work/sample-*.log)"
    fi
    # `serve` on the GPU: /generate writes what sample wrote with the same decoder.
    served=$(serve_generate "$work/gpt-ck" "$device" '{"prompt": "The ", "tokens": 120, "temperature": 0}')
    s3=$?
    if [ "$s1" -eq 0 ] && [ "$s3" -eq 0 ] && [ "The $served" = "$gpu_text" ]; then
      record "GPT serve /generate on the $device" PASS "the greedy text of sample on the $device"
    else
      record "GPT serve /generate on the $device" FAIL "exit $s3, text '${served:0:40}...' (see $work/serve.log)"
    fi
  fi
}


# serve_generate CHECKPOINT DEVICE BODY: `slurm-train serve` of CHECKPOINT on DEVICE, a free port
# of the loopback address; prints the text of its answer to POST /generate BODY, then stops it.
serve_generate() {
  local log=$work/serve.log pid port="" text status=0
  "${launch[@]}" "$slurm_train" serve "$1" --device "$2" --port 0 --no-auth >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    port=$(sed -n 's|.* at http://127.0.0.1:\([0-9]*\) .*|\1|p' "$log")
    [ -n "$port" ] || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.2
  done
  if [ -z "$port" ]; then
    kill "$pid" 2>/dev/null
    return 1
  fi
  text=$("$PYTHON" - "$port" "$3" <<'EOF2'
import json, sys, urllib.request
answer = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/generate", sys.argv[2].encode(), timeout=120)
sys.stdout.write(json.load(answer)["text"])
EOF2
) || status=1
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" || status=1
  printf '%s' "$text"
  return "$status"
}

# value KEY LOG FIELD: FIELD's value on LOG's last line that starts with KEY (gpu_check's and the
# PyTorch peers' key=value lines).
value() { grep -E "^$1 " "$2" | tail -n1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }

# (d) the MLP benchmarks.
bench_mlp() {
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
}

# (e) GPT-2 124M.
bench_gpt() {
  # ---- (e) GPT-2 124M ----
  if [ "$skip_bench" -eq 0 ] && [ "$device" = cpu ]; then
    echo "== (e) GPT-2 124M: skipped under --device cpu: the engine's GPT step (CudaGptStep) is CUDA only,"
    echo "   and PyTorch alone on the CPU (seconds a step) would say nothing of the GPU"
  elif [ "$skip_bench" -eq 0 ]; then
    # 30 timed steps after 5: a few seconds of steps at the expected 20-100 ms each; the rest of
    # each run is start-up (and torch.compile's compilation, a minute or so).
    gpt_args=(--precision bf16 --batch 8 --block 1024 --layers 12 --heads 12 --embd 768 --vocab 50304 --steps 30
              --warmup 5)
    echo "== (e) GPT-2 124M (bf16, batch 8 x 1024 tokens): engine, PyTorch eager, PyTorch torch.compile"
    # --kernel-times: after the timed steps, 3 more recorded (CUPTI, torch.profiler): each side's
    # GPU time by kernel, to say where the engine's step loses to PyTorch's.
    timeout 120 "${launch[@]}" "$gpu_check" gpt "${gpt_args[@]}" --kernel-times 3 >"$work/gpt-engine.log" 2>&1
    gpt_engine_status=$?
    timeout 120 "${launch[@]}" "$gpu_check" gpt "${gpt_args[@]}" --no-flash-attention >"$work/gpt-engine-fused.log" 2>&1
    timeout 120 "$PYTHON" "$torch_gpt_script" --mode eager "${gpt_args[@]}" --kernel-times 3 >"$work/gpt-torch-eager.log" 2>&1
    gpt_eager_status=$?
    timeout 240 "$PYTHON" "$torch_gpt_script" --mode compile "${gpt_args[@]}" >"$work/gpt-torch-compile.log" 2>&1
    gpt_compile_status=$?
    cat "$work/gpt-engine.log" "$work/gpt-engine-fused.log" "$work/gpt-torch-eager.log" "$work/gpt-torch-compile.log"
    ge=$work/gpt-engine.log gt=$work/gpt-torch-eager.log gc=$work/gpt-torch-compile.log
    torch_version=${torch_version:-$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)}
    engine_tps=$(value engine_gpt "$ge" tokens_per_s) engine_mfu=$(value engine_gpt "$ge" mfu)
    eager_tps=$(value torch_gpt "$gt" tokens_per_s) eager_mfu=$(value torch_gpt "$gt" mfu)
    compile_tps=$(value torch_gpt "$gc" tokens_per_s) compile_mfu=$(value torch_gpt "$gc" mfu)
    compile_note=""
    if grep -q '^torch_gpt mode=compile failed' "$gc"; then compile_note=" (compile failed)"
    elif [ "$gpt_compile_status" -ne 0 ]; then compile_note=" (exit $gpt_compile_status)"; fi
    gpt_ratio=$(awk -v a="$engine_tps" -v b="$eager_tps" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b}')
    echo
    printf '%-46s %14s %10s %10s\n' "GPT-2 124M, bf16, batch 8 x 1024" "tokens/s" "ms/step" "MFU %"
    printf '%-46s %14s %10s %10s\n' "engine (CudaGptStep, tensor-core attention)" "${engine_tps:-?}" \
      "$(value engine_gpt "$ge" step_ms)" "${engine_mfu:-?}"
    gf=$work/gpt-engine-fused.log
    printf '%-46s %14s %10s %10s\n' "engine, fp32 fused attention kernels" "$(value engine_gpt "$gf" tokens_per_s)" \
      "$(value engine_gpt "$gf" step_ms)" "$(value engine_gpt "$gf" mfu)"
    printf '%-46s %14s %10s %10s\n' "PyTorch $torch_version eager (SDPA)" "${eager_tps:-?}" \
      "$(value torch_gpt "$gt" step_ms)" "${eager_mfu:-?}"
    printf '%-46s %14s %10s %10s\n' "PyTorch $torch_version torch.compile$compile_note" "${compile_tps:-?}" \
      "$(value torch_gpt "$gc" step_ms)" "${compile_mfu:-?}"
    printf '%-46s %14s\n' "engine / PyTorch eager" "${gpt_ratio:-?}x"
    echo "   (MFU: (6 N + 12 L C T) FLOPs per token, N = parameters but wpe, over $(value engine_gpt "$ge" peak_tflops) TFLOP/s dense bf16)"
    detail="${engine_tps:-?} vs ${eager_tps:-?} tokens/s (${gpt_ratio:-?}x); exit $gpt_engine_status / $gpt_eager_status"
    if [ "$gpt_engine_status" -eq 0 ] && [ "$gpt_eager_status" -eq 0 ] && [ -n "$gpt_ratio" ] &&
       awk -v x="$engine_tps" -v y="$eager_tps" 'BEGIN {exit !(x >= y)}'; then
      record "GPT >= PyTorch eager" PASS "$detail"
    else
      record "GPT >= PyTorch eager" FAIL "$detail (see $work/gpt-*.log)"
    fi
    if [ "$gpt_engine_status" -eq 0 ] && [[ $engine_mfu =~ ^[0-9]+(\.[0-9]+)?$ ]] &&
       awk -v m="$engine_mfu" 'BEGIN {exit !(m >= 40)}'; then
      record "GPT MFU >= 40%" PASS "$engine_mfu% (PyTorch eager ${eager_mfu:-?}%, compile ${compile_mfu:-?}%)"
    else
      record "GPT MFU >= 40%" FAIL "${engine_mfu:-?}% (exit $gpt_engine_status; see $work/gpt-engine.log)"
    fi
  fi
}

# (c) GPT-2 124M's GPU step against the CPU step, 3 steps of 2 x 1024 tokens: the full vocabulary
# and sequence, which gpt-tiny's runs do not reach.
check_gpt2_against_cpu() {
  if [ "$device" = cpu ]; then
    echo "== (c) GPT-2 124M against the CPU step: skipped under --device cpu (gpu_check's GPT step is CUDA only)"
    return
  fi
  echo "== (c) GPT-2 124M: the $device step against the CPU step, 3 steps of 2 x 1024 tokens"
  local precision
  for precision in fp32 bf16; do
    verdict_of "GPT-2 124M $precision vs CPU" "$work/gpt2-vs-cpu-$precision.log" 240 gpt-vs-cpu --precision "$precision"
  done
}

# slurm-train's GPU telemetry (what each rank samples through NVML) against nvidia-smi for 30 s on a
# busy GPU: utilisation, power, and the energy counter against the integrated power.
check_telemetry() {
  if [ "$device" = cpu ]; then
    echo "== telemetry against nvidia-smi: skipped under --device cpu (no GPU to sample)"
    return
  fi
  echo "== telemetry: slurm-train's GPU samples against nvidia-smi, 30 s under load"
  verdict_of "telemetry vs nvidia-smi" "$work/telemetry.log" 90 telemetry --seconds 30
}

# (g) A run's TensorBoard files (scalars every step, histograms every 100 steps), read by
# TensorBoard's own reader and by our decoder of the published format: the same records; and a
# run resumed after a crash, as TensorBoard shows it: each step once.
check_tensorboard() {
  if [ -z "$h5" ]; then
    record "TensorBoard's reader" FAIL "no Fashion-MNIST data for the run (see $work/import.log)"
    return
  fi
  echo "== (g) TensorBoard's own event reader on a run's event files"
  rm -rf "$work/tensorboard"
  st_run tensorboard "$device" --train.steps 300 --train.tensorboard "$work/tensorboard" \
    --train.tensorboard_histograms 100
  local run_status=$? ours theirs
  ours=$("$PYTHON" "$tb_decoder" "$work/tensorboard" 2>&1)
  theirs=$("$PYTHON" "$tb_decoder" --tensorboard "$work/tensorboard" 2>&1)
  local theirs_status=$? records tags
  records=$(grep -c '"step"' <<<"$ours") tags=$(grep -o '"tag": "[^"]*"' <<<"$ours" | sort -u | wc -l)
  if [ "$run_status" -eq 0 ] && [ "$theirs_status" -eq 0 ] && [ "$ours" = "$theirs" ] && [ "$records" -gt 0 ]; then
    record "TensorBoard's reader" PASS "$records records, $tags tags, histograms included: the same as our decoder's"
  elif [ "$theirs_status" -eq 3 ]; then
    record "TensorBoard's reader" FAIL "TensorBoard is not installed for $PYTHON (pip install tensorboard)"
  else
    record "TensorBoard's reader" FAIL "run exit $run_status, reader exit $theirs_status; $(diff <(echo "$ours") <(echo "$theirs") | head -3 | tr '\n' ' ')"
  fi
  # A restart: killed in step 150, after the checkpoint of step 100, then resumed. TensorBoard's
  # own EventAccumulator shows each step once, the resumed run's, as our decoder's --shown does.
  rm -rf "$work/tb-restart" "$work/tb-restart-ck"
  st_run tb-crash "$device" --train.steps 240 --ckpt.dir "$work/tb-restart-ck" --ckpt.every 100 \
    --train.tensorboard "$work/tb-restart" --inject-fault crash@150:0
  st_run tb-resume "$device" --train.steps 240 --ckpt.dir "$work/tb-restart-ck" --ckpt.every 100 \
    --train.tensorboard "$work/tb-restart"
  run_status=$?
  ours=$("$PYTHON" "$tb_decoder" --shown "$work/tb-restart" 2>&1 | sort)
  theirs=$("$PYTHON" "$tb_decoder" --shown --tensorboard "$work/tb-restart" 2>&1 | sort)
  local losses
  losses=$(grep -c '"tag": "train/loss"' <<<"$theirs")
  if [ "$run_status" -eq 0 ] && [ "$ours" = "$theirs" ] && [ "$losses" -eq 240 ]; then
    record "TensorBoard after a restart" PASS "each of 240 steps shown once, the resumed run's (its purge = our decoder's)"
  else
    record "TensorBoard after a restart" FAIL "resume exit $run_status, $losses loss points shown; $(diff <(echo "$ours") <(echo "$theirs") | head -3 | tr '\n' ' ')"
  fi
}

# The kernels first, then the GPT (its benchmark, then its runs), then the MLP: if a lease ends the
# call early, what it cut is what matters least.
wanted kernels && check_kernels
wanted gpt-bench && bench_gpt
wanted gpt-vs-cpu && check_gpt2_against_cpu
wanted gpt-runs && check_gpt_runs
wanted telemetry && check_telemetry
wanted tensorboard && check_tensorboard
wanted mlp-step && check_mlp_step
wanted mlp-runs && check_mlp_runs
wanted mlp-bench && bench_mlp

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
  # One file: the device tool brings back a few files, not a folder of logs.
  tar -C "$work" -czf "$OUT/gpu-check-logs.tar.gz" --exclude='*.h5' --exclude='*-ck' . 2>/dev/null
fi
exit $failed
