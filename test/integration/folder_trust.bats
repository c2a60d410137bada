#!/usr/bin/env bats
# Folders and files of a job's state that another user could change (docs/security.md): a link
# another user planted in a sticky folder every user can write (/tmp), as the checkpoint folder
# or as `slurm-train srun`'s record folder, is refused before anything is written where it
# points; a metrics file another user made first is refused and left as it was; and a checkpoint
# folder held by a run keeps the run's files when the link to it is repointed meanwhile. The
# second user is nobody, as root makes their files and links (chown).

load helpers

setup_file() {
  ensure_fashion_mnist
}

setup() {
  set_small_args
  d=$BATS_TEST_TMPDIR
  nobody=$(id -u nobody)
  # /tmp as it is on every machine, and a folder of the job's user the planted link points to.
  mkdir -m 1777 "$d/sticky"
  mkdir "$d/victim"
}

# plant NAME: a link $d/sticky/NAME -> $d/victim that nobody made.
plant() {
  ln -s "$d/victim" "$d/sticky/$1"
  chown -h nobody "$d/sticky/$1"
}

@test "a checkpoint folder reached through a link another user planted in a sticky folder is refused, naming link and folder (exit 2)" {
  plant ckpt
  run --separate-stderr "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 4 --ckpt.dir "$d/sticky/ckpt" \
    --log-dir "$d/logs"
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"the checkpoint folder '$d/sticky/ckpt': '$d/sticky/ckpt' is a link (to '$d/victim') that uid $nobody (nobody) made in '$d/sticky', a folder every user can write (mode 1777): they could point it elsewhere while the job runs"* ]]
  [ -z "$(ls -A "$d/victim")" ]
}

@test "slurm-train srun: a record folder reached through such a link is refused before any step runs (exit 2)" {
  plant logs
  run env SLURM_JOB_ID=77 SLURM_JOB_NODELIST=node1 "$BUILD/bin/slurm-train" srun --log-dir "$d/sticky/logs" -- hostname
  echo "$output"
  [ "$status" -eq 2 ]
  [[ $output == *"slurm-train srun: error: the log folder '$d/sticky/logs/77': '$d/sticky/logs' is a link (to '$d/victim') that uid $nobody (nobody) made in '$d/sticky'"* ]]
  [[ $output != *"step on"* ]]
  [ -z "$(ls -A "$d/victim")" ]
}

@test "a metrics file another user made first at the job's name is refused, naming its owner, and left as it was" {
  echo '{"run": "theirs", "step": 0, "loss": 0.001}' >"$d/metrics.jsonl"
  chown nobody "$d/metrics.jsonl"
  before=$(cat "$d/metrics.jsonl")
  run --separate-stderr "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 4 --train.metrics "$d/metrics.jsonl" \
    --log-dir "$d/logs"
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"the metrics file '$d/metrics.jsonl' belongs to uid $nobody (nobody), not to this job's user (uid 0 (root))"* ]]
  [ "$(cat "$d/metrics.jsonl")" = "$before" ]
}

@test "a run's checkpoint folder is held: a link to it repointed during the run redirects none of its files" {
  mkdir "$d/first" "$d/second"
  ln -s first "$d/ck"
  "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 1000 --ckpt.dir "$d/ck" --ckpt.every 20 \
    --log-dir "$d/logs" >"$d/run.out" 2>&1 &
  local pid=$! deadline=$((SECONDS + 60))
  until [ -e "$d/first/latest" ] || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
  [ -e "$d/first/latest" ]
  ln -sfn second "$d/ck"
  # Read after the repointing: the last checkpoint is yet to come.
  at_repoint=$(cat "$d/first/latest")
  wait "$pid"
  cat "$d/run.out"
  echo "latest when the link was repointed: $at_repoint"
  [ "$at_repoint" != step-00001000.h5 ]
  grep -q "checkpoint step 1000 -> $d/ck/step-00001000.h5" "$d/run.out"
  [ "$(cat "$d/first/latest")" = step-00001000.h5 ]
  [ -e "$d/first/step-00001000.h5" ]
  [ -e "$d/first/restarts" ]
  [ -z "$(ls -A "$d/second")" ]
}
