#!/usr/bin/env bash
# serve.sh (make bench): `slurm-train serve` against the service a Python user would write for the
# same model: Flask (Debian's python3-flask, its threaded server) around PyTorch (Debian's
# python3-torch), bench/flask_serve.py, on this machine, on the loopback address. Both serve the
# same model file (the reference MLP, examples/fashion-mnist.toml, trained 200 steps once and kept
# under BUILD/bench/serve) with the same compute threads (SERVE_BENCH_THREADS, default 1), and the
# same client loads both, build/bench/serve_load: SERVE_BENCH_CONNECTIONS (default 8) keep-alive
# connections POSTing one real test image (raw pixels, as /predict takes them) back to back, 1 s
# of warm-up, then SERVE_BENCH_SECONDS (default 5) counted (werkzeug 2.2, Flask's server, closes
# each connection after its answer; the client connects again, inside the request's latency).
# SERVE_BENCH_ROUNDS (default 3) rounds alternate serve and Flask; each side's best round (its
# requests/s, with that round's p50 and p99) is kept. Nothing is pinned: the servers and the
# client share the cores.
# Records serve_rps (requests/s, peer Flask's) and serve_p99 (s, peer Flask's); targets in
# bench/targets.tsv. With SERVE_BENCH_ROWS=1, only make bench's table rows. Exit 1 when a server
# does not start or a request fails.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/results.sh"
source "$ROOT/bench/inputs.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
ROUNDS=${SERVE_BENCH_ROUNDS:-3}
CONNECTIONS=${SERVE_BENCH_CONNECTIONS:-8}
COUNTED=${SERVE_BENCH_SECONDS:-5}
THREADS=${SERVE_BENCH_THREADS:-1}
WARMUP=1
PY=/usr/bin/python3  # Debian's, which sees python3-torch and python3-flask
W=$BUILD/bench/serve
cd "$ROOT"
die() { echo "serve.sh: $*" >&2; exit 1; }
[[ -x $BUILD/bin/slurm-train && -x $BUILD/bench/serve_load ]] || die "build $BUILD/bin and $BUILD/bench first (make bench)"
"$PY" -c "import flask, torch, h5py" 2>/dev/null ||
  die "$PY cannot import flask, torch and h5py (apt-get install python3-flask python3-torch python3-h5py)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$W"

data=$(fashion_mnist_dir)
model=$W/model.h5
if [[ ! -f $model ]]; then
  "$BUILD/bin/slurm-train" run --config examples/fashion-mnist.toml --data.train "$data/train.h5" \
    --data.test "$data/test.h5" --train.steps 200 --train.save "$model" --train.metrics "" --log-dir= \
    --train.log_every 0 >"$W/train.out" 2>&1 || { cat "$W/train.out" >&2; die "training the model failed"; }
fi
# The body: the test set's first image, as the 784 raw values /predict takes.
body=$W/body.json
"$PY" - "$data/test.h5" "$body" <<'EOF'
import json, sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    image = f["images"][0].reshape(-1)
with open(sys.argv[2], "w") as out:
    json.dump({"data": [[int(v) for v in image]]}, out)
EOF

serve_pid='' flask_pid=''
stop_servers() {
  local pid
  for pid in $serve_pid $flask_pid; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $serve_pid $flask_pid; do wait "$pid" 2>/dev/null || true; done
}
trap stop_servers EXIT
# healthy NAME PORT PID LOG: waits (about a minute at most) for GET /health on PORT to answer 200.
healthy() {
  for _ in $(seq 400); do
    kill -0 "$3" 2>/dev/null || { cat "$4" >&2; die "$1 ended before it answered /health"; }
    "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1)' \
      "$2" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$4" >&2
  die "$1 did not answer /health on port $2 within a minute"
}

"$BUILD/bin/slurm-train" serve "$model" --port 0 --no-auth --threads "$THREADS" >"$W/serve.out" 2>"$W/serve.err" &
serve_pid=$!
serve_port=
for _ in $(seq 300); do
  serve_port=$(sed -n 's|^slurm-train serve: .* at http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$W/serve.out")
  [[ -n $serve_port ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $serve_port ]] || { cat "$W/serve.out" "$W/serve.err" >&2; die "slurm-train serve did not say its port"; }
flask_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# As bench/run.sh's PyTorch peers: OpenMP threads that block while they wait, instead of spinning
# on the cores that the other threads (werkzeug's, the client's) need.
OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS "$PY" bench/flask_serve.py "$model" --port "$flask_port" \
  --threads "$THREADS" >"$W/flask.out" 2>&1 &
flask_pid=$!
healthy "slurm-train serve" "$serve_port" "$serve_pid" "$W/serve.err"
healthy "the Flask service" "$flask_port" "$flask_pid" "$W/flask.out"

# load NAME PORT: one round of the client on PORT; its key=value line.
load() {
  "$BUILD/bench/serve_load" --port "$2" --body "$body" --connections "$CONNECTIONS" --seconds "$COUNTED" \
    --warmup "$WARMUP" || die "$1: requests failed (above)"
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# better A B: whichever line has more requests/s.
better() {
  if [[ -z $1 ]] || awk -v a="$(field requests_per_s "$1")" -v b="$(field requests_per_s "$2")" 'BEGIN { exit !(b > a) }'
  then echo "$2"; else echo "$1"; fi
}
best_serve='' best_flask=''
for round in $(seq "$ROUNDS"); do
  s=$(load "slurm-train serve" "$serve_port")
  f=$(load "the Flask service" "$flask_port")
  best_serve=$(better "$best_serve" "$s")
  best_flask=$(better "$best_flask" "$f")
  [[ ${SERVE_BENCH_ROWS:-0} = 1 ]] || echo "round $round: serve $s"$'\n'"         flask $f"
done
stop_servers
serve_pid='' flask_pid=''

rps=$(field requests_per_s "$best_serve") flask_rps=$(field requests_per_s "$best_flask")
p50=$(field p50_ms "$best_serve") flask_p50=$(field p50_ms "$best_flask")
p99=$(field p99_ms "$best_serve") flask_p99=$(field p99_ms "$best_flask")
seconds() { awk -v ms="$1" 'BEGIN { printf "%.6f", ms / 1000 }'; }
bench_record serve_rps "$rps" "$flask_rps"
bench_record serve_p99 "$(seconds "$p99")" "$(seconds "$flask_p99")"
# row KEY WHAT VALUE PEER FORMAT NOTE: one row of make bench's table, value / peer as the ratio.
row() {
  local target verdict
  read -r target verdict <<<"$(bench_verdict "$1" "$3" "$4" | sed 's/^\([<>]=\) /\1/')"
  printf "%-52s %12$5 %12$5 %8s %8s  %s\n" "$2" "$3" "$4" "$(awk -v a="$3" -v b="$4" 'BEGIN { printf "%.2fx", a / b }')" \
    "$target" "$verdict $6"
}
row serve_rps "serve: /predict req/s, 1 image, $CONNECTIONS connections" "$rps" "$flask_rps" .0f \
  "(peer: Flask + PyTorch; $THREADS compute thread(s) each)"
row serve_p99 "serve: /predict p99 latency, ms" "$p99" "$flask_p99" .2f "(p50 $p50 ms, Flask's $flask_p50 ms)"
