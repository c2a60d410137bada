#!/usr/bin/env bats
# A real Prometheus (Debian's prometheus and prometheus-node-exporter) scrapes the textfiles a
# two-node run writes: the training's progress from rank 0's file, each rank's GPU series (the
# tests' stand-in NVML) from its own, and every query of examples/grafana-dashboard.json answers.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

teardown() {
  local pid
  for pid in ${SERVERS:-}; do kill "$pid" 2>/dev/null || true; done
  for pid in ${SERVERS:-}; do wait "$pid" 2>/dev/null || true; done
}

free_port() {
  $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS: until URL answers 200.
wait_http() {
  local deadline=$((SECONDS + $2))
  until $PY -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.3
  done
}

@test "Prometheus reads the training's progress and each rank's GPU series through node_exporter; every dashboard query answers" {
  set_small_args
  local dir=$BATS_TEST_TMPDIR textfiles=$BATS_TEST_TMPDIR/textfiles exporter prom
  mkdir -p "$textfiles"
  exporter=$(free_port)
  prom=$(free_port)
  prometheus-node-exporter --web.listen-address="127.0.0.1:$exporter" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$textfiles" >"$dir/exporter.log" 2>&1 &
  SERVERS=$!
  cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: nodes
    static_configs:
      - targets: ["127.0.0.1:$exporter"]
YML
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
    --web.listen-address="127.0.0.1:$prom" >"$dir/prometheus.log" 2>&1 &
  SERVERS="$SERVERS $!"
  wait_http "http://127.0.0.1:$exporter/metrics" 30
  wait_http "http://127.0.0.1:$prom/-/ready" 60 || { cat "$dir/prometheus.log"; false; }

  # Rank 1 10 ms slower a step, long enough (3 windows of 2 s) to be named a straggler.
  run --separate-stderr on_gpus busy-node "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 1200 \
    --train.prometheus "$textfiles/train.prom" --train.prometheus_every 10 --inject-fault slow@10:1
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output =~ job\ ([0-9]+):\ 2\ rank ]]
  local job=${BASH_REMATCH[1]}
  [[ $output =~ after\ 1200\ steps\ in\ ([0-9.]+)\ s\;\ GPU\ energy\ ([0-9]+)\ J ]]
  local seconds=${BASH_REMATCH[1]} joules=${BASH_REMATCH[2]}
  [[ $stderr == *"straggler: rank 1"* ]]
  sleep 3  # two scrapes of the final files

  # The progress and the per-rank series, through Prometheus's HTTP API.
  $PY - "http://127.0.0.1:$prom" "$job" "$seconds" "$joules" <<'PYEOF'
import json, sys, urllib.parse, urllib.request
url, job, seconds, joules = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
def query(q):
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': q})}", timeout=10) as r:
        answer = json.load(r)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]
step = query(f'slurm_train_step{{job_id="{job}"}}')
assert len(step) == 1 and float(step[0]["value"][1]) == 1200, step
assert float(query(f'slurm_train_steps_total{{job_id="{job}"}}')[0]["value"][1]) == 1200
# The step went up while Prometheus watched: it saw the training progress, not only its end.
seen = query(f'count_over_time(slurm_train_step{{job_id="{job}"}}[5m])')
assert float(seen[0]["value"][1]) >= 3, seen
assert float(query(f'min_over_time(slurm_train_step{{job_id="{job}"}}[5m])')[0]["value"][1]) < 1200
util = query(f'slurm_train_gpu_utilization_percent{{job_id="{job}"}}')
got = sorted((u["metric"]["rank"], u["metric"]["gpu"], u["metric"]["gpu_uuid"], u["value"][1]) for u in util)
assert got == [("0", "0", "GPU-0a0a0a0a-1111-2222-3333-444444444444", "87"),
               ("1", "1", "GPU-1a1a1a1a-1111-2222-3333-444444444444", "93")], got
hosts = {u["metric"]["rank"]: u["metric"]["host"] for u in util}
assert hosts["0"] != hosts["1"], hosts
slow = query(f'slurm_train_rank_slowdown{{job_id="{job}"}}')
assert [s["metric"]["rank"] for s in slow] == ["1"], slow
# The energy counters span the run: their last values, less what the stand-in's counters held
# when each rank's NVML started (busy-node.facts: 7000 J and 9000 J), are at least the run's own
# figure (the ranks sample from before its first step to after its last) and at most its 412 +
# 455 W over the run and a few seconds of start-up and teardown. Prometheus's first scrape may
# come seconds into the run on a loaded machine, so the span is not taken from its first sample;
# that it watched the counters grow is asked apart.
last = query(f'sum(max_over_time(slurm_train_gpu_energy_joules_total{{job_id="{job}"}}[5m]))')
spent = float(last[0]["value"][1]) - 16000
assert 0.99 * joules <= spent <= 867 * (seconds + 10), (last, joules, seconds)
grew = query(f'sum(max_over_time(slurm_train_gpu_energy_joules_total{{job_id="{job}"}}[5m]) - '
             f'min_over_time(slurm_train_gpu_energy_joules_total{{job_id="{job}"}}[5m]))')
assert float(grew[0]["value"][1]) > 0, grew
print("progress, GPU series, the straggler and the energy read back from Prometheus")
PYEOF
  run $PY "$ROOT/test/integration/dashboard_queries.py" "http://127.0.0.1:$prom" "$ROOT/examples/grafana-dashboard.json" "$job"
  echo "$output"
  [ "$status" -eq 0 ]
}
