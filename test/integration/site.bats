#!/usr/bin/env bats
# How a site installs slurm-train and how users meet it: make install into a prefix, the Lmod
# module in a clean login shell, man pages, submit, the examples on a two-node local cluster,
# plot, and make uninstall.

load helpers

setup_file() {
  ensure_fashion_mnist
  export PREFIX=$BATS_FILE_TMPDIR/opt/slurm-train/$(cat "$ROOT/VERSION")
  make -C "$ROOT" --no-print-directory BUILD="$BUILD" install PREFIX="$PREFIX" >/dev/null
  start_test_cluster --nodes 2
  # A user's working folder: the examples copied from the install, the data where they expect it.
  export WORK=$BATS_FILE_TMPDIR/work
  mkdir -p "$WORK/data"
  cp -r "$PREFIX/share/slurm-train/examples" "$WORK/examples"
  ln -s "$TEST_DATA" "$WORK/data/fashion-mnist"
}

teardown_file() {
  stop_test_cluster
}

# login_shell COMMANDS: a clean login shell as a new user gets one (user_home; Lmod from
# /etc/profile.d), with only this cluster's SLURM_CONF carried over, and the harness's sanitizer
# settings (SANITIZE=1).
login_shell() {
  local sanitizer=() v
  for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose \
    PMIX_MCA_mca_base_component_disable_dlclose; do
    [ -z "${!v:-}" ] || sanitizer+=("$v=${!v}")
  done
  env -i HOME="$(user_home)" TERM=dumb PATH=/usr/local/bin:/usr/bin:/bin SLURM_CONF="$SLURM_CONF" \
    OMPI_MCA_btl_vader_single_copy_mechanism=none "${sanitizer[@]}" bash -l -c "$1"
}

@test "make install lays out the site's files under the prefix" {
  v=$(cat "$ROOT/VERSION")
  for f in bin/slurm-train lib/slurm/spank_train.so etc/plugstack.conf.d/slurm-train.conf \
    share/slurm-train/profiles/cluster-ib.conf share/slurm-train/examples/fashion-mnist.sbatch \
    share/slurm-train/examples/interactive.md share/man/man1/slurm-train.1 share/man/man8/spank_train.8 \
    "modulefiles/slurm-train/$v.lua" share/doc/slurm-train/README.md lib/python/slurm_train/__init__.py; do
    [ -f "$PREFIX/$f" ] || { echo "missing $f"; false; }
  done
  grep -qx "required $PREFIX/lib/slurm/spank_train.so profiles=$PREFIX/share/slurm-train/profiles bind=soft" \
    "$PREFIX/etc/plugstack.conf.d/slurm-train.conf"
}

@test "module load in a clean login shell gives slurm-train, its man pages and SLURM_TRAIN_HOME; unload restores" {
  run login_shell "
    before=\$PATH
    module use '$PREFIX/modulefiles' && module load slurm-train 2>&1
    slurm-train --version | head -1
    echo \"home=\$SLURM_TRAIN_HOME\"
    man -w slurm-train; man -w 8 spank_train
    module help slurm-train 2>&1 | grep -c 'Examples to copy'
    module unload slurm-train
    # Lmod drops duplicate PATH entries of the login profile; everything else is as before.
    dedup() { printf %s \"\$1\" | tr : '\\n' | awk '!seen[\$0]++' | paste -sd:; }
    [ \"\$(dedup \"\$PATH\")\" = \"\$(dedup \"\$before\")\" ] && echo path-restored
    echo \"home-after=\${SLURM_TRAIN_HOME:-unset}\"
    command -v slurm-train || echo gone"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $(tr -d '\n' <<<"$output") == *"slurm-train $(cat "$ROOT/VERSION"): examples in$PREFIX/share/slurm-train/examples"* ]]
  [[ $output == *"slurm-train $(cat "$ROOT/VERSION")"$'\n'"home=$PREFIX"* ]]
  [[ $output == *"$PREFIX/share/man/man1/slurm-train.1"* ]]
  [[ $output == *"$PREFIX/share/man/man8/spank_train.8"* ]]
  [[ $output == *"path-restored"* ]]
  [[ $output == *"home-after=unset"* ]]
  [[ $output == *"gone"* ]]
}

@test "module load puts the Python helper on PYTHONPATH: a program under exec imports slurm_train; pydoc3 shows it" {
  run --separate-stderr login_shell "cd '$WORK' && module use '$PREFIX/modulefiles' && module load slurm-train 2>/dev/null &&
    slurm-train exec --log-dir= -- /usr/bin/python3 -c 'import slurm_train as s; s.heartbeat(1, loss=0.5); print(\"from\", s.__file__)' &&
    pydoc3 slurm_train | head -5"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"from $PREFIX/lib/python/slurm_train/__init__.py"* ]]
  [[ $output == *"slurm_train - Cooperate with \`slurm-train exec\`"* ]]
}

@test "man slurm-train renders" {
  run login_shell "module use '$PREFIX/modulefiles'; module load slurm-train 2>/dev/null; MANPAGER=cat man slurm-train 2>&1"
  [ "$status" -eq 0 ]
  [[ $output == *"slurm-train - data-parallel training on Slurm clusters"* ]]
  [[ $output == *"EXIT STATUS"* ]]
}

@test "submit --dry-run prints a script Slurm accepts; submit runs it to completion" {
  cd "$WORK"
  # The script is stdout alone: a login profile may say things on stderr (pyenv's rehash does).
  run --separate-stderr login_shell "cd '$WORK' && module use '$PREFIX/modulefiles' && module load slurm-train 2>/dev/null &&
    slurm-train submit examples/fashion-mnist.toml --nodes 2 --tasks-per-node 1 --time 00:10:00 --dry-run --train.steps=20"
  echo "$stderr"
  [ "$status" -eq 0 ]
  script=$output
  [[ $script == *"#SBATCH --nodes=2"*"#SBATCH --ntasks-per-node=1"*"#SBATCH --open-mode=append"*"#SBATCH --signal=USR2@120"*"#SBATCH --requeue"* ]]
  [[ $script == *"srun --mpi=pmix '$PREFIX/bin/slurm-train' run --config '$WORK/examples/fashion-mnist.toml' '--train.steps=20'"* ]]
  # The reference configuration names no ckpt.dir: the requeueable job gets one in the submit folder.
  [[ $script == *" '--ckpt.dir=$WORK/checkpoints/slurm-train-'\"\${SLURM_JOB_ID}\"" ]]
  bash -n <<<"$script"
  run sbatch --test-only <<<"$script"
  [ "$status" -eq 0 ]

  run login_shell "cd '$WORK' && module use '$PREFIX/modulefiles' && module load slurm-train 2>/dev/null &&
    slurm-train submit examples/fashion-mnist.toml --nodes 2 --tasks-per-node 1 --time 00:10:00 --train.steps=20 --train.metrics="
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ submitted\ job\ ([0-9]+) ]]
  job=${BASH_REMATCH[1]}
  [[ $output == *"log:    $WORK/logs/slurm-train-$job.out"* ]]
  [[ $output == *"checkpoints: $WORK/checkpoints/slurm-train-$job (added"* ]]
  run wait_job "$job" 180
  cat "$WORK/logs/slurm-train-$job.out"
  [ "$output" = COMPLETED ]
  grep -q "training .* on 2 rank(s), 20 steps" "$WORK/logs/slurm-train-$job.out"
  grep -q "^final: test_acc" "$WORK/logs/slurm-train-$job.out"
}

@test "submit refuses a bad configuration or option before anything is queued" {
  cd "$WORK"
  run "$PREFIX/bin/slurm-train" submit examples/fashion-mnist.toml --train.lr=-1
  [ "$status" -ne 0 ]
  [[ $output == *"train.lr = -1: expected a number in (0, 10]"* ]]
  run "$PREFIX/bin/slurm-train" submit examples/fashion-mnist.toml --time "soon" --partition 'a b'
  [ "$status" -eq 2 ]
  [[ $output == *"--time 'soon': expected a Slurm time limit"* ]]
  [[ $output == *"--partition 'a b': expected letters, digits"* ]]
  [ ! -d "$WORK/logs-refused" ]
}

@test "examples/multinode.sbatch runs on two nodes" {
  cd "$WORK"
  run env PATH="$PREFIX/bin:$PATH" sbatch --parsable examples/multinode.sbatch --train.steps=20 --train.metrics=
  [ "$status" -eq 0 ]
  job=$output
  run wait_job "$job" 180
  cat "fashion-mnist-2n-$job.out"
  [ "$output" = COMPLETED ]
  grep -q "on 4 rank(s), 20 steps" "fashion-mnist-2n-$job.out"
}

@test "examples/sweep.sbatch runs its four array tasks, and plot draws them on one chart" {
  cd "$WORK"
  run env PATH="$PREFIX/bin:$PATH" sbatch --parsable examples/sweep.sbatch --train.steps=40 --model.hidden=[64] \
    --train.eval_batch=5000
  [ "$status" -eq 0 ]
  job=$output
  for task in 0 1 2 3; do
    run wait_job "${job}_$task" 300
    [ "$output" = COMPLETED ] || { cat "sweep-${job}_$task.out"; false; }
  done
  for lr in 0.0003 0.001 0.002 0.004; do
    [ "$(grep -c '"loss":' "sweep/lr-$lr/metrics.jsonl")" -eq 40 ]
    [ -f "sweep/lr-$lr/model.h5" ]
  done
  run "$PREFIX/bin/slurm-train" plot sweep/*/metrics.jsonl -o sweep.png --title "learning-rate sweep"
  [ "$status" -eq 0 ]
  [[ $output == *"wrote sweep.png (4 run(s))"* ]]
  run $PY -c "
import struct
data = open('sweep.png', 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', data[:8]
print(struct.unpack('>II', data[16:24]))"
  [ "$output" = "(1200, 1100)" ]
  cp sweep.png "$BUILD/test/sweep.png"  # kept for a look
}

@test "the commands of examples/interactive.md work: srun from the login node and salloc" {
  cd "$WORK"
  run env PATH="$PREFIX/bin:$PATH" srun --mpi=pmix -n2 slurm-train run --config examples/fashion-mnist.toml \
    --train.steps=10 --train.metrics=
  [ "$status" -eq 0 ]
  [[ $output == *"on 2 rank(s), 10 steps"* ]]
  run env PATH="$PREFIX/bin:$PATH" salloc -N2 --ntasks-per-node=2 srun --mpi=pmix slurm-train run \
    --config examples/fashion-mnist.toml --train.steps=10 --train.metrics=
  [ "$status" -eq 0 ]
  [[ $output == *"on 4 rank(s), 10 steps"* ]]
}

@test "plot refuses a file that is not metrics, naming it and the line" {
  printf '{"step": 0}\n' >"$BATS_TEST_TMPDIR/bad.jsonl"
  run "$PREFIX/bin/slurm-train" plot "$BATS_TEST_TMPDIR/bad.jsonl" -o "$BATS_TEST_TMPDIR/x.png"
  [ "$status" -eq 1 ]
  [[ $output == *"bad.jsonl:1: not a slurm-train metrics line"* ]]
}

@test "make uninstall removes exactly what was installed and leaves the prefix empty" {
  touch "$BATS_FILE_TMPDIR/opt/keep-me"
  run make -C "$ROOT" --no-print-directory BUILD="$BUILD" uninstall PREFIX="$PREFIX"
  [ "$status" -eq 0 ]
  [ -d "$PREFIX" ]
  [ -z "$(ls -A "$PREFIX")" ]
  [ -f "$BATS_FILE_TMPDIR/opt/keep-me" ]
  run make -C "$ROOT" --no-print-directory BUILD="$BUILD" uninstall PREFIX="$PREFIX"
  [ "$status" -ne 0 ]
  [[ $output == *"no slurm-train installation under '$PREFIX'"* ]]
}
