#!/usr/bin/env bats
# slurm-train serve: an MLP's /predict gives PyTorch's classes and probabilities on the 10,000 test
# images; a GPT's /generate gives what `sample` gives; bad requests get a 4xx naming what was
# wrong and the service goes on; a bearer token keeps others out; under Slurm, the example sbatch
# script says where it listens, and scancel ends it after answering the request in flight.

load helpers

setup_file() {
  ensure_fashion_mnist
  export MODELS=$BATS_FILE_TMPDIR/models
  mkdir -p "$MODELS"
  # One epoch of the reference MLP (235 steps): a model file, and checkpoints with best and latest.
  "$BUILD/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --data.train "$TEST_DATA/train.h5" \
    --data.test "$TEST_DATA/test.h5" --train.epochs 1 --train.metrics "" --train.log_every 0 --log-dir= \
    --train.save "$MODELS/mlp.h5" --ckpt.dir "$MODELS/mlp-ck" --ckpt.every 100 --ckpt.keep_best test_accuracy \
    >/dev/null
  if [ -d /usr/share/games/fortunes ]; then
    local tokens=$BUILD/test/data/fortunes
    [ -f "$tokens/tokens.h5" ] || "$BUILD/bin/slurm-train" data import fortunes --out "$tokens" >/dev/null
    "$BUILD/bin/slurm-train" run --config "$ROOT/examples/gpt-tiny.toml" --data.train "$tokens/tokens.h5" \
      --data.test "$tokens/tokens.h5" --train.steps 30 --train.warmup_steps 5 --train.global_batch 8 \
      --train.metrics "" --train.log_every 0 --log-dir= --ckpt.dir "$MODELS/gpt-ck" --ckpt.every 30 >/dev/null
  fi
}

setup() {
  ST=$BUILD/bin/slurm-train
  CHECK=$ROOT/test/integration/serve_check.py
}

teardown() {
  [ -z "${SERVER:-}" ] || kill "$SERVER" 2>/dev/null || true
  stop_test_cluster
}

# start_server MODEL [serve options]: serve on a free port of the loopback address; sets SERVER
# (its pid), PORT, OUT (its stdout), and TOKEN_FILE and SERVE_TOKEN (exported: serve_check.py
# sends it) when serve made its token, once it listens.
start_server() {
  OUT=$BATS_TEST_TMPDIR/serve.out
  "$ST" serve "$@" --port 0 >"$OUT" 2>"$BATS_TEST_TMPDIR/serve.err" &
  SERVER=$!
  for _ in $(seq 100); do
    PORT=$(sed -n 's|.* at http://127.0.0.1:\([0-9]*\) .*|\1|p' "$OUT")
    [ -n "$PORT" ] && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$BATS_TEST_TMPDIR/serve.err" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$PORT" ]
  TOKEN_FILE=$(sed -n 's|^slurm-train serve: the bearer token is in \([^ ]*\) .*|\1|p' "$OUT")
  export SERVE_TOKEN=
  [ -z "$TOKEN_FILE" ] || SERVE_TOKEN=$(cat "$TOKEN_FILE")
}

@test "serve /predict: the 10,000 test images get load_in_pytorch.py's classes, probabilities within 1e-5" {
  start_server "$MODELS/mlp.h5"
  grep -q "mlp.h5 (mlp, on cpu) at http://127.0.0.1:$PORT (node " "$OUT"
  run "$PY" "$CHECK" predict-all "$PORT" "$MODELS/mlp.h5" "$TEST_DATA/test.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  # Requests that arrived together ran as batches; the metrics count every request and batch.
  run "$PY" "$CHECK" request "$PORT" GET /metrics
  [[ $output == "200 "* ]]
  grep -q '^slurm_train_serve_requests_total{path="/predict",status="200"} 10$' <<<"${output#200 }"
  grep -q '^slurm_train_serve_batch_rows_count 10$' <<<"${output#200 }"
  grep -q '^slurm_train_serve_request_seconds_count{path="/predict"} 10$' <<<"${output#200 }"
}

@test "serve takes a checkpoint folder's best and latest by name, and the folder itself" {
  best=$(head -1 "$MODELS/mlp-ck/best")
  start_server "$MODELS/mlp-ck/best"
  run "$PY" "$CHECK" request "$PORT" GET /health
  echo "$output"
  [[ $output == "200 "* ]]
  grep -q "\"file\":\"[^\"]*$(basename "$best")\"" <<<"$output"
  grep -q '"model":"mlp"' <<<"$output"
  kill "$SERVER"
  wait "$SERVER" || true
  newest=$(ls "$MODELS"/mlp-ck/step-*.h5 | tail -1)
  start_server "$MODELS/mlp-ck"
  step=$(basename "$newest" .h5)
  grep -q "$step.h5 (mlp, step $((10#${step#step-})), on cpu)" "$OUT"
  run "$PY" "$CHECK" predict-all "$PORT" "$newest" "$TEST_DATA/test.h5"
  [ "$status" -eq 0 ]
}

@test "serve /generate: the text slurm-train sample writes for the same seed, checkpoint given as DIR/latest" {
  [ -d "$MODELS/gpt-ck" ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  start_server "$MODELS/gpt-ck/latest" --device cpu --threads 2
  for seed in 1 7; do
    expected=$("$ST" sample "$MODELS/gpt-ck/latest" --prompt "Q: " --tokens 120 --seed $seed --temperature 0.9 \
      --top-k 40 --quiet --device cpu)
    run "$PY" "$CHECK" request "$PORT" POST /generate \
      "{\"prompt\": \"Q: \", \"tokens\": 120, \"seed\": $seed, \"temperature\": 0.9, \"top_k\": 40}"
    [[ $output == "200 "* ]]
    text=$("$PY" -c 'import base64, json, sys; sys.stdout.buffer.write(base64.b64decode(json.loads(sys.argv[1])["base64"]))' "${output#200 }")
    [ "Q: $text" = "$expected" ]
  done
  run "$PY" "$CHECK" request "$PORT" GET /metrics
  grep -q '^slurm_train_serve_generated_tokens_total 240$' <<<"${output#200 }"
  run "$PY" "$CHECK" request "$PORT" POST /generate '{"prompt": "Q: ", "tokens": 5000}'
  [[ $output == "413 "* ]]
  grep -q 'at most 1024' <<<"$output"
  run "$PY" "$CHECK" request "$PORT" POST /predict '{"data": [[1]]}'
  [[ $output == "404 "*"serves a gpt model, which answers POST /generate"* ]]
}

@test "serve: bad requests get a 4xx with a JSON error naming what was wrong, and the service goes on" {
  start_server "$MODELS/mlp.h5"
  run "$PY" "$CHECK" bad-requests "$PORT"
  echo "$output"
  [ "$status" -eq 0 ]
  kill -0 "$SERVER"
  # Every answer was counted by its status.
  run "$PY" "$CHECK" request "$PORT" GET /metrics
  grep -q '^slurm_train_serve_requests_total{path="/predict",status="413"} 2$' <<<"${output#200 }"
  grep -q '^slurm_train_serve_requests_total{path="other",status="404"} 1$' <<<"${output#200 }"
}

@test "serve --token-file: 401 without the token or with another, 200 with it; a file others may read is refused" {
  token=$BATS_TEST_TMPDIR/token
  echo "the-token-$RANDOM" >"$token"
  chmod 644 "$token"
  run "$ST" serve "$MODELS/mlp.h5" --port 0 --token-file "$token"
  [ "$status" -eq 1 ]
  [[ $output == *"--token-file $token: mode 0644 lets other users read or change it"*"chmod 600"* ]]
  chmod 600 "$token"
  start_server "$MODELS/mlp.h5" --token-file "$token"
  grep -q "bearer token required" "$OUT"
  run "$PY" "$CHECK" request "$PORT" GET /health
  [[ $output == "401 "*"no Authorization header"* ]]
  run "$PY" "$CHECK" request "$PORT" GET /metrics "" wrong-token
  [[ $output == "401 "*"does not carry this service's bearer token"* ]]
  run "$PY" "$CHECK" request "$PORT" POST /predict '{"data": [[1]]}' wrong-token
  [[ $output == "401 "* ]]
  run "$PY" "$CHECK" request "$PORT" GET /health "" "$(cat "$token")"
  [[ $output == "200 "*'"status":"ok"'* ]]
}

@test "serve without --token-file makes a token in a file of the user's alone: 401 without it, 200 with it; --no-auth on loopback only" {
  export HOME=$BATS_TEST_TMPDIR/home
  mkdir "$HOME"
  start_server "$MODELS/mlp.h5"
  echo "token file: $TOKEN_FILE"
  [[ $TOKEN_FILE == "$HOME/.slurm-train/serve/serve-"*".token" ]]
  [ "$(stat -c %a "$TOKEN_FILE")" = 600 ]
  [ "$(stat -c %a "$HOME/.slurm-train/serve")" = 700 ]
  [ "${#SERVE_TOKEN}" -eq 64 ]
  grep -q "bearer token required" "$OUT"
  run "$PY" "$CHECK" request "$PORT" GET /health "" ""
  [[ $output == "401 "*"no Authorization header"* ]]
  run "$PY" "$CHECK" request "$PORT" POST /predict '{"data": [[1]]}' not-the-token
  [[ $output == "401 "* ]]
  run "$PY" "$CHECK" request "$PORT" GET /health
  [[ $output == "200 "*'"status":"ok"'* ]]
  # Gone when serve stops.
  kill -TERM "$SERVER"
  wait "$SERVER"
  [ ! -e "$TOKEN_FILE" ]
  # A folder others may read is refused, not used.
  chmod 755 "$HOME/.slurm-train/serve"
  run "$ST" serve "$MODELS/mlp.h5" --port 0
  [ "$status" -eq 1 ]
  [[ $output == *"has mode 0755: other users could read the token"* ]]
  run "$ST" serve "$MODELS/mlp.h5" --port 0 --no-auth --host 0.0.0.0
  [ "$status" -eq 1 ]
  [[ $output == *"--no-auth is for the loopback address only"* ]]
  start_server "$MODELS/mlp.h5" --no-auth
  grep -q "no authentication (--no-auth)" "$OUT"
  run "$PY" "$CHECK" request "$PORT" GET /health
  [[ $output == "200 "* ]]
}

@test "serve: a /generate whose tokens nest 100,000 arrays gets 400 before any value is rendered; serve answers the next" {
  [ -d "$MODELS/gpt-ck" ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  start_server "$MODELS/gpt-ck/latest" --device cpu
  run "$PY" "$CHECK" nested "$PORT" /generate 100000
  echo "$output"
  [ "$status" -eq 0 ]
  kill -0 "$SERVER"
}

@test "serve: a /predict whose data nest 100,000 arrays gets 400, and serve answers the next request" {
  start_server "$MODELS/mlp.h5"
  run "$PY" "$CHECK" nested "$PORT" /predict 100000
  echo "$output"
  [ "$status" -eq 0 ]
  kill -0 "$SERVER"
}

@test "serve: a 300 MB chunked body gets 413 as the limit is passed; serve's peak memory grows by less than 100 MB" {
  start_server "$MODELS/mlp.h5"
  run "$PY" "$CHECK" chunked "$PORT" 300 "$SERVER"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "serve: a gzip bomb gets 415 and 20,000 header fields get 431; serve answers after each" {
  start_server "$MODELS/mlp.h5"
  run "$PY" "$CHECK" gzip-bomb "$PORT" 512
  echo "$output"
  [ "$status" -eq 0 ]
  run "$PY" "$CHECK" headers "$PORT" 20000
  echo "$output"
  [ "$status" -eq 0 ]
  # 101 fields, within the size: over the count.
  run "$PY" "$CHECK" headers "$PORT" 101
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"431"*"header fields; at most 100"* ]]
}

@test "serve: 200 slow connections trickling bytes do not keep a request from an answer within a second" {
  # Beyond the per-address limit (32): refused with 429 at once.
  start_server "$MODELS/mlp.h5"
  run "$PY" "$CHECK" slow-loris "$PORT" 200 127.0.0.2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"(168 refused with 429)"* ]]
  kill "$SERVER"
  wait "$SERVER" || true
  # Every one of them let in: they wait on the event loop, not on a thread each.
  start_server "$MODELS/mlp.h5" --connections 300 --connections-per-source 300 --workers 4
  run "$PY" "$CHECK" slow-loris "$PORT" 200 127.0.0.2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"(0 refused with 429)"* ]]
}

@test "serve: requests beyond the workers and the queue get 503 at once" {
  [ -d "$MODELS/gpt-ck" ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  start_server "$MODELS/gpt-ck/latest" --device cpu --threads 1 --workers 1 --queue 0
  # One long generation holds the one worker; the next request finds no room.
  "$PY" "$CHECK" request "$PORT" POST /generate '{"prompt": "Q: ", "tokens": 1024, "seed": 3}' >"$BATS_TEST_TMPDIR/long" &
  long=$!
  for _ in $(seq 100); do
    run "$PY" "$CHECK" request "$PORT" GET /health
    [[ $output == "503 "* ]] && break
    sleep 0.05
  done
  echo "$output"
  [[ $output == "503 "*"busy: 1 requests are being answered or waiting"* ]]
  wait "$long"
  [[ $(cat "$BATS_TEST_TMPDIR/long") == "200 "* ]]
  run "$PY" "$CHECK" request "$PORT" GET /health
  [[ $output == "200 "* ]]
}

@test "serve listens on the loopback address unless --host says otherwise" {
  start_server "$MODELS/mlp.h5"
  run ss -Hltn "sport = :$PORT"
  echo "$output"
  [[ $output == *"127.0.0.1:$PORT"* ]]
  [[ $output != *"0.0.0.0:$PORT"* ]]
  run "$ST" serve "$MODELS/mlp.h5" --host 192.0.2.1 --port 0
  [ "$status" -eq 1 ]
  [[ $output == *"cannot listen on 192.0.2.1:0"* ]]
}

@test "under Slurm: examples/serve.sbatch says where it listens; scancel answers the request in flight, then ends" {
  [ -d "$MODELS/gpt-ck" ] || skip "the Debian package fortunes is not installed (scripts/install-deps.sh)"
  start_test_cluster --nodes 1
  work=$BATS_TEST_TMPDIR/w
  mkdir -p "$work"
  cd "$work"
  export HOME=$work/home SERVE_PORT=0 PATH=$BUILD/bin:$PATH
  mkdir "$HOME"
  job=$(sbatch --parsable "$ROOT/examples/serve.sbatch" "$MODELS/gpt-ck/latest" --device cpu)
  for _ in $(seq 300); do
    line=$(grep -s ' at http://' "serve-$job.out" || true)
    [ -n "$line" ] && break
    sleep 0.2
  done
  echo "$line"
  [[ $line == *"(gpt, step 30, on cpu) at http://"*":"*" (node "*", job $job), bearer token required" ]]
  # A token of its own for the job.
  token_file=$(sed -n 's|^slurm-train serve: the bearer token is in \([^ ]*\) .*|\1|p' "serve-$job.out")
  echo "$token_file"
  [[ $token_file == "$HOME/.slurm-train/serve/serve-$job-"*".token" ]]
  [ "$(stat -c %a "$token_file")" = 600 ]
  node=$(sed -n 's|.*(node \([^,]*\),.*|\1|p' <<<"$line")
  port=$(sed -n 's|.* at http://[^:]*:\([0-9]*\) .*|\1|p' <<<"$line")
  [ "$node" = "$(squeue -h -j "$job" -o %N)" ]
  # A long generation in flight when the job is cancelled is answered whole.
  "$PY" "$CHECK" request "$port" POST /generate '{"prompt": "Q: ", "tokens": 1024, "seed": 3}' \
    "$(cat "$token_file")" >answer &
  client=$!
  # Once it is in flight (beside the request that asks):
  "$PY" "$CHECK" wait-metric "$port" "$(cat "$token_file")" "slurm_train_serve_requests_in_flight 2" 30
  scancel "$job"
  wait "$client"
  [[ $(cat answer) == "200 "* ]]
  text=$("$PY" -c 'import base64, json, sys; print(len(base64.b64decode(json.loads(sys.argv[1])["base64"])))' "$(cut -d' ' -f2- answer)")
  [ "$text" -eq 1024 ]
  wait_job "$job"
  cat "serve-$job.out"
  grep -q "SIGTERM: answering the requests in flight, then stopping" "serve-$job.out"
  grep -q "slurm-train serve: stopped" "serve-$job.out"
}
