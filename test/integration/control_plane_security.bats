#!/usr/bin/env bats
# The watchdog's control plane against another user of the cluster: an unprivileged user (nobody)
# attacks a two-node job of root's, `exec` and `run`, while one of its ranks really hangs. The
# attacks: the old protocol's hello, a hello with the attacker's own munge credential (or no
# valid proof) before the rank connects, a forged failure, a hello for a rank already connected,
# forged beats over the real hang, and 1,000 idle connections. The job must end as it would
# alone (the hang named, with the hung rank's own step), every connection of the attacker must
# be closed, and rank 0's log must tell of each kind of refusal exactly once. And the cipher of
# the credentials, whose session keys cross the network: AES-256, never the daemon's choice.

load helpers

setup_file() {
  # Another user must reach the cluster's munged, as on any cluster: a folder every user may enter.
  TEST_CLUSTER_IN=$(mktemp -d /tmp/slurm-train-security.XXXXXX)
  chmod 755 "$TEST_CLUSTER_IN"
  export TEST_CLUSTER_IN
  start_test_cluster --nodes 2
  install -m 755 "$BUILD/test/control_plane_attack" "$TEST_CLUSTER_IN/attack"
  ensure_fashion_mnist
}

teardown_file() {
  stop_test_cluster
  rm -rf "$TEST_CLUSTER_IN"
}

setup() {
  ST=$BUILD/bin/slurm-train
  LOGS=$BATS_TEST_TMPDIR/logs
  NODE1=$(awk '$2 == "node1" { print $1 }' "$TEST_CLUSTER_DIR/etc/hosts")
  MUNGE=$TEST_CLUSTER_DIR/munge/munge.socket
}

# as_attacker ARGS...: the attack tool as user nobody, from this machine, against node1 (task 0).
as_attacker() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$TEST_CLUSTER_IN/attack" --host "$NODE1" "$@"
}

# wait_for_line FILE_GLOB TEXT [SECONDS]: until a file matching the glob holds TEXT.
wait_for_line() {
  local deadline=$((SECONDS + ${3:-30}))
  until grep -qs -- "$2" $1; do
    [ $SECONDS -lt $deadline ] || { echo "never saw '$2' in $1"; return 1; }
    sleep 0.1
  done
}

# beats_and_idle TARGET...: forged beats for rank 1 over 8 s and, meanwhile, 1,000 idle
# connections for 7 s, at TARGET (--port P, or --job J --step S); each must be closed.
beats_and_idle() {
  as_attacker beats "$@" --rank 1 --seconds 8 >"$BATS_TEST_TMPDIR/beats" 2>&1 &
  local beats=$!
  run as_attacker idle "$@" --count 1000 --seconds 7
  echo "$output"
  [ "$output" = "idle: 0 of 1000 connections still open after 7 s" ]
  wait $beats || true
  cat "$BATS_TEST_TMPDIR/beats"
  grep -q "^beats: closed by rank 0 after" "$BATS_TEST_TMPDIR/beats"
}

# ended_with_the_hang PID OUTPUT TEXT: the job (its srun, PID) exited 4 naming the hang as TEXT
# in OUTPUT, without a word of the attacker's.
ended_with_the_hang() {
  local status=0
  wait "$1" || status=$?
  cat "$2"
  [ "$status" -eq 4 ]
  grep -q -- "$3" "$2"
  [ "$(grep -c 'evil\|4242\|forged' "$2")" -eq 0 ]
}

# refusals_logged_once LOG KIND_TEXT...: each refusal text stands exactly once in rank 0's log.
refusals_logged_once() {
  local log=$1 text n
  shift
  for text in "$@"; do
    n=$(grep -c -- "refused a connection from [0-9.]*: $text" "$log" || true)
    echo "'$text': logged $n time(s)"
    [ "$n" -eq 1 ]
  done
}

@test "exec under attack by another user: strangers are closed, each refusal logged once, and the real hang is still named" {
  [ "$(id -u nobody)" -ne 0 ]
  setpriv --reuid=nobody --regid=nogroup --clear-groups -- test -w "$MUNGE"  # the attacker reaches munged
  cat >"$BATS_TEST_TMPDIR/beat.sh" <<'EOF'
#!/bin/bash
# Its step into the heartbeat every 0.2 s; rank 1 stops at step 40 and sleeps: a real hang.
for ((step = 1; step <= 1000; step++)); do
  if [ "$RANK" = 1 ] && [ $step -ge 40 ]; then echo "rank 1 hangs at step $step"; sleep 1000; fi
  echo $step >"$SLURM_TRAIN_HEARTBEAT"
  sleep 0.2
done
EOF
  chmod +x "$BATS_TEST_TMPDIR/beat.sh"
  # Rank 1's supervisor starts 4 s late, so that the attacker can speak for rank 1 before it does.
  srun -N2 -n2 bash -c '[ "$SLURM_PROCID" = 1 ] && sleep 4; exec "$0" exec --log-dir "$1" --hang-timeout 8 -- "$2"' \
    "$ST" "$LOGS" "$BATS_TEST_TMPDIR/beat.sh" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
  job_pid=$!
  wait_for_line "$LOGS/*/rank-0.log" "watchdog: listening on port"
  job=$(basename "$(dirname "$(ls "$LOGS"/*/rank-0.log)")")
  # Before rank 1 connects: a hello with the attacker's own credential, a failure without a proof.
  run as_attacker hello --job "$job" --step 0 --rank 1 --munge-socket "$MUNGE"
  echo "$output"; [[ $output == "hello: closed by rank 0 after "* ]]
  run as_attacker fail --job "$job" --step 0 --rank 1
  echo "$output"; [[ $output == "fail: closed by rank 0 after "* ]]
  run as_attacker old-hello --job "$job" --step 0
  echo "$output"; [[ $output == "old-hello: closed by rank 0 after "* ]]
  wait_for_line "$LOGS/*/rank-1.log" "started"
  # After it: its hello again (the attacker's credential), its beats over its hang, idle connections.
  run as_attacker hello --job "$job" --step 0 --rank 1 --munge-socket "$MUNGE"
  echo "$output"; [[ $output == "hello: closed by rank 0 after "* ]]
  beats_and_idle --job "$job" --step 0
  ended_with_the_hang $job_pid "$BATS_TEST_TMPDIR/err" \
    "hang: rank 1 (node2, pid [0-9]*) made no progress for 8 s in the program phase of step 39"
  log=$(ls "$LOGS"/*/rank-0.log)
  refusals_logged_once "$log" "its credential is another user's than the job's" \
    "its hello carried no valid proof" "it did not open with a hello of this protocol" \
    "it said hello for a rank that is already connected" "it sent no whole hello within the time allowed" \
    "its address has too many connections waiting"
  grep -q "a credential of uid [0-9]* (nobody); the job runs as uid 0 (root)\|Unauthorized credential" "$log"
  grep -q "watchdog: 100[0-9] connection(s) refused: " "$log"
}

@test "run under attack by another user: strangers are closed, each refusal logged once, and the real hang is still named" {
  [ "$(id -u nobody)" -ne 0 ]
  set_small_args
  srun --mpi=pmix -N2 -n2 "$ST" run "${SMALL[@]}" --train.steps 5000 --inject-fault slow@100,hang@150:1 \
    --hang-timeout 8 --log-dir "$LOGS" >"$BATS_TEST_TMPDIR/out" 2>&1 &
  job_pid=$!
  wait_for_line "$LOGS/*/rank-0.log" "first step"
  # The port is chosen by the kernel and sent over MPI; anyone reads it from `ss -ltn`, the test from the log.
  port=$(sed -n 's/.*watchdog: listening on port \([0-9]*\) .*/\1/p' "$LOGS"/*/rank-0.log)
  run as_attacker old-hello --port "$port"
  echo "$output"; [[ $output == "old-hello: closed by rank 0 after "* ]]
  run as_attacker hello --port "$port" --rank 1
  echo "$output"; [[ $output == "hello: closed by rank 0 after "* ]]
  run as_attacker fail --port "$port" --rank 1
  echo "$output"; [[ $output == "fail: closed by rank 0 after "* ]]
  beats_and_idle --port "$port"
  ended_with_the_hang $job_pid "$BATS_TEST_TMPDIR/out" \
    "hang: rank 1 (node2, pid [0-9]*) made no progress for 8 s in the forward phase of step 150"
  log=$(ls "$LOGS"/*/rank-0.log)
  refusals_logged_once "$log" "it did not open with a hello of this protocol" \
    "it said hello for a rank that is already connected" "it sent no whole hello within the time allowed" \
    "its address has too many connections waiting"
  grep -q "watchdog: 100[0-9] connection(s) refused: " "$log"
}

@test "munge: a rank's credential is encrypted with AES-256 by the cluster's munged, and rank 0 refuses one in another cipher (none, AES-128, Blowfish)" {
  run --separate-stderr "$BUILD/test/munge_cipher" --munge-socket "$MUNGE"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"proof: cipher aes256, accepted"* ]]
  [[ $output == *"none: refused: a credential encrypted with none (0), not aes256: its session key may have been read on the way"* ]]
  [[ $output == *"aes128: refused: a credential encrypted with aes128 (4), not aes256"* ]]
  [[ $output == *"blowfish: refused: a credential encrypted with blowfish (2), not aes256"* ]]
}
