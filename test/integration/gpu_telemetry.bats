#!/usr/bin/env bats
# GPU telemetry without a GPU: the tests' stand-in NVML (test/fixtures/nvml/stand_in.cc) answers
# with scripted readings and an Xid, and every rank of a real two-node run samples the GPU it was
# given, as it would NVIDIA's library on a GPU node.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

@test "each rank's GPU series carry its job, rank, host and GPU; the epoch line shows utilisation and power" {
  set_small_args
  local dir=$BATS_TEST_TMPDIR
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.epochs 1 \
    --train.prometheus "$dir/train.prom" --train.metrics "$dir/metrics.jsonl"
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  # Rank 0's GPU (GPU 0 of the facts) on the epoch line.
  [[ $output =~ epoch\ +1\ .*\ gpu\ 87%\ 412\ W ]]
  local r host uuid util watts
  for r in 0 1; do
    [ -f "$dir/train.rank$r.prom" ]
    cat "$dir/train.rank$r.prom"
    host=$(sed -n "s/^ *rank \+$r \+host \([^ ]*\) .*/\1/p" <<<"$output")
    [ -n "$host" ]
    uuid=$([ "$r" = 0 ] && echo GPU-0a0a0a0a-1111-2222-3333-444444444444 || echo GPU-1a1a1a1a-1111-2222-3333-444444444444)
    util=$([ "$r" = 0 ] && echo 87 || echo 93)
    watts=$([ "$r" = 0 ] && echo 412 || echo 455)
    grep -qF "slurm_train_gpu_utilization_percent{job_id=\"" "$dir/train.rank$r.prom"
    grep -qF ",rank=\"$r\",host=\"$host\",gpu=\"$r\",gpu_uuid=\"$uuid\"} $util" "$dir/train.rank$r.prom"
    grep -qF "slurm_train_gpu_power_watts{" "$dir/train.rank$r.prom"
    grep -q "^slurm_train_gpu_power_watts{.*rank=\"$r\".*} $watts$" "$dir/train.rank$r.prom"
    grep -q "^slurm_train_gpu_energy_joules_total{.*rank=\"$r\".*} [0-9.e+]*$" "$dir/train.rank$r.prom"
    grep -q "^slurm_train_gpu_throttle_reasons{.*rank=\"$r\".*} $([ "$r" = 0 ] && echo 4 || echo 0)$" \
      "$dir/train.rank$r.prom"
    ! grep -q "last_xid" "$dir/train.rank$r.prom"
  done
  # Parsed by Prometheus's own rules where promtool is installed (the real-Prometheus test reads
  # these files through node_exporter).
  if command -v promtool >/dev/null; then
    promtool check metrics <"$dir/train.rank0.prom"
  fi
}

@test "energy per step and per sample: the ranks' energy counters over the run, in the final line and the metrics; every rank's GPU in the metrics; plot draws the GPU panel" {
  set_small_args
  local dir=$BATS_TEST_TMPDIR
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.epochs 1 \
    --train.metrics "$dir/metrics.jsonl" --inject-fault slow@5
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ final:.*after\ ([0-9]+)\ steps\ in\ ([0-9.]+)\ s\;\ GPU\ energy\ ([0-9]+)\ J,\ ([0-9.e+-]+)\ J/step,\ ([0-9.e+-]+)\ J/sample ]]
  local steps=${BASH_REMATCH[1]} seconds=${BASH_REMATCH[2]} joules=${BASH_REMATCH[3]}
  # The stand-in's counters grow by its power: 412 W + 455 W for as long as the steps ran, which
  # is at most the run's time and, at 5 ms a step or more, at least steps x 5 ms.
  grep '"energy"' "$dir/metrics.jsonl"
  $PY - "$dir/metrics.jsonl" "$steps" "$seconds" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
e = [l["energy"] for l in lines if "energy" in l][-1]
steps, seconds = int(sys.argv[2]), float(sys.argv[3])
watts = 412 + 455
assert e["steps"] == steps, e
ran = e["joules"] / watts
assert steps * 0.005 <= ran <= seconds + 0.5, (ran, steps, seconds)
assert abs(e["joules_per_step"] * steps - e["joules"]) < 1e-6 * e["joules"], e
assert abs(e["joules_per_sample"] * steps * 250 - e["joules"]) < 1e-6 * e["joules"], e
gpu = [l["gpu"] for l in lines if "gpu" in l]
assert gpu and gpu[-1]["utilization_percent"] == 87 and gpu[-1]["power_watts"] == 412, gpu
# Every rank's GPU, gathered at the evaluation: rank 1 has GPU 1 (93%, 455 W).
ranks = {r["rank"]: (r["utilization_percent"], r["power_watts"]) for r in gpu[-1]["ranks"]}
assert ranks == {0: (87, 412), 1: (93, 455)}, gpu[-1]
PYEOF
  # plot draws the GPU panel from the same file (its energy line passed over).
  run "$BUILD/bin/slurm-train" plot "$dir/metrics.jsonl" -o "$dir/chart.png"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(head -c 8 "$dir/chart.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
}

@test "a rank that dies after an Xid on its GPU is named with the GPU and the Xid" {
  set_small_args
  # Rank 1 has GPU 1, whose Xid 79 the driver reports at once; it then kills itself mid-run.
  run --separate-stderr on_gpus xid-node "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.epochs 2 \
    --inject-fault slow@20,crash@100:1
  echo "$output"
  echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr =~ rank\ 1\ \(host\ [^,]+,\ pid\ [0-9]+\)\ is\ gone.*after\ GPU\ 1\ \(GPU-1a1a1a1a-1111-2222-3333-444444444444\):\ Xid\ 79\ at\ 20[0-9-]+T[0-9:]+Z ]]
}

@test "a rank that hangs after an Xid on its GPU is named with the GPU and the Xid; the step report carries it" {
  set_small_args
  local report=$BATS_TEST_TMPDIR/step.outcome
  # Beats come every second: the hang (after 80 steps of 20 ms) is judged after rank 1 has sent its Xid.
  export SLURM_TRAIN_STEP_REPORT=$report
  run --separate-stderr on_gpus xid-node "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 5000 \
    --inject-fault slow@20,hang@80:1 --hang-timeout 4
  unset SLURM_TRAIN_STEP_REPORT
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 4 ]
  [[ "$output$stderr" == *"hang: rank 1 (node2, pid "*") made no progress for 4 s"*"(rank 1 on node2, GPU 1 (GPU-1a1a1a1a-1111-2222-3333-444444444444): Xid 79 at "* ]]
  cat "$report"
  $PY -c "import json, sys; o = json.load(open(sys.argv[1])); assert o['cause'] == 'hang' and o['gpu_fault'].startswith('GPU 1 (GPU-1a1a1a1a-1111-2222-3333-444444444444): Xid 79 at '), o" "$report"
}

@test "a MIG instance given by its UUID is watched through its GPU" {
  set_small_args
  local dir=$BATS_TEST_TMPDIR
  run --separate-stderr env SLURM_TRAIN_NVML_LIBRARY="$BUILD/test/nvml-stand-in/libnvidia-ml.so.1" \
    NVML_STAND_IN="$ROOT/test/fixtures/nvml/mig-node.facts" CUDA_VISIBLE_DEVICES=MIG-6d6d6d6d-1111-2222-3333-444444444444 \
    "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 20 --train.prometheus "$dir/train.prom"
  echo "$stderr"
  [ "$status" -eq 0 ]
  cat "$dir/train.rank0.prom"
  grep -q '^slurm_train_gpu_utilization_percent{.*gpu="0",gpu_uuid="GPU-0a0a0a0a-1111-2222-3333-444444444444"} 87$' \
    "$dir/train.rank0.prom"
  ! grep -q 'gpu="1"' "$dir/train.rank0.prom"
}

@test "without NVML, a rank given a GPU says once why its telemetry is off, and trains" {
  set_small_args
  run --separate-stderr env SLURM_TRAIN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 CUDA_VISIBLE_DEVICES=0 \
    "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 20
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'GPU telemetry off: NVML (/nonexistent/libnvidia-ml.so.1) cannot be loaded' <<<"$stderr")" -eq 1 ]
  [[ $output != *"gpu "*"% "* ]]
}

@test "exec: each task samples its GPU into its own textfile and every rank's GPU is in the metrics; a program that dies after an Xid is named with it" {
  local dir=$BATS_TEST_TMPDIR
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" exec --prometheus "$dir/job.prom" \
    --metrics "$dir/metrics.jsonl" -- sleep 2
  echo "$stderr"
  [ "$status" -eq 0 ]
  cat "$dir/metrics.jsonl"
  # Rank 0's own reading and rank 1's, which its beats brought to rank 0: the last line has both.
  $PY - "$dir/metrics.jsonl" <<'PYEOF'
import json, sys
gpu = [json.loads(l)["gpu"] for l in open(sys.argv[1]) if '"gpu"' in l]
assert gpu and gpu[-1]["utilization_percent"] == 87 and gpu[-1]["power_watts"] == 412, gpu
ranks = {r["rank"]: (r["utilization_percent"], r["power_watts"]) for r in gpu[-1]["ranks"]}
assert ranks == {0: (87, 412), 1: (93, 455)}, gpu[-1]
PYEOF
  grep -q '^slurm_train_gpu_utilization_percent{.*rank="0".*gpu="0",gpu_uuid="GPU-0a0a0a0a-1111-2222-3333-444444444444"} 87$' \
    "$dir/job.rank0.prom"
  grep -q '^slurm_train_gpu_utilization_percent{.*rank="1".*gpu="1",gpu_uuid="GPU-1a1a1a1a-1111-2222-3333-444444444444"} 93$' \
    "$dir/job.rank1.prom"
  # Task 1's program fails after its GPU's Xid: task 0's console names the task, the GPU and the Xid.
  run --separate-stderr on_gpus xid-node "$BUILD/bin/slurm-train" exec -- \
    bash -c 'if [ "$SLURM_PROCID" = 1 ]; then sleep 2; exit 3; fi; sleep 60'
  echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr =~ rank\ 1\ .*its\ program\ bash\ \(pid\ [0-9]+\)\ exited\ with\ (status|code)\ 3\ after\ GPU\ 1\ \(GPU-1a1a1a1a-1111-2222-3333-444444444444\):\ Xid\ 79\ at ]]
}

@test "exec: the job's GPU energy per step and per token from every rank's counters, in the metrics and on the console" {
  local dir=$BATS_TEST_TMPDIR
  local t0=$SECONDS
  # Each rank's program reports steps 0 to 20, 0.1 s apart (0.5 s after the first, so that its
  # supervisor, which looks every 0.2 s, sees it): 20 steps after its first report.
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" exec --metrics "$dir/metrics.jsonl" \
    --tokens-per-step 4096 -- bash -c 'for i in $(seq 0 20); do echo $i > "$SLURM_TRAIN_HEARTBEAT"
      if [ $i = 0 ]; then sleep 0.5; else sleep 0.1; fi; done'
  local elapsed=$((SECONDS - t0 + 1))
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $stderr =~ slurm-train\ exec:\ GPU\ energy\ ([0-9]+)\ J\ over\ 20\ steps,\ ([0-9.e+-]+)\ J/step,\ ([0-9.e+-]+)\ J/token ]]
  grep '"energy"' "$dir/metrics.jsonl"
  $PY - "$dir/metrics.jsonl" "$elapsed" "${BASH_REMATCH[2]}" <<'PYEOF'
import json, sys
e = [json.loads(l)["energy"] for l in open(sys.argv[1]) if '"energy"' in l]
assert len(e) == 1, e
e, elapsed, console_per_step = e[0], float(sys.argv[2]), float(sys.argv[3])
# The stand-in's counters grow by its power: 412 W (rank 0's GPU) and 455 W (rank 1's), each from
# its program's first report to its exit, at least the 2 s of sleeps and at most the whole run.
watts = 412 + 455
assert e["steps"] == 20, e
assert 2.0 * watts <= e["joules"] <= elapsed * watts, (e, elapsed)
# Both ranks counted 20 steps: the job's joules per step are its joules over 20.
assert abs(e["joules_per_step"] * 20 - e["joules"]) < 1e-6 * e["joules"], e
assert abs(e["joules_per_token"] * 4096 - e["joules_per_step"]) < 1e-9 * e["joules_per_step"], e
assert abs(console_per_step - e["joules_per_step"]) < 0.01 * e["joules_per_step"], (console_per_step, e)
PYEOF
  # Without a unit, per step only; a program that reports no step gives no energy.
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" exec --metrics "$dir/none.jsonl" -- sleep 1
  [ "$status" -eq 0 ]
  [[ ! $stderr =~ GPU\ energy ]]
  ! grep -q '"energy"' "$dir/none.jsonl"
}
