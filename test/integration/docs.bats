#!/usr/bin/env bats
# The documentation, run as written: the command blocks of the README's "For users", "Training"
# and "Checkpoints" and of examples/interactive.md, each group in a fresh folder and one clean
# login shell (Lmod from /etc/profile.d) with the module of a `make install` into a temporary
# prefix, on a local two-node cluster. A `<!-- docs.bats: ... -->` line before each block says
# whether it runs (doc_blocks.py reads them). What the harness adds, and only this:
# - SLURM_TRAIN_TRAIN_STEPS=100 in the environment, as the README says, to keep the runs short;
# - the site's prefix in the README's `module use` (/opt/slurm-train/VERSION) is the test's;
# - `set -e`, so that a failing line fails its group; the module loaded first where the block
#   does not load it itself; a wait for an empty queue before a block marked so (a user waits);
# - OMPI_ALLOW_RUN_AS_ROOT*: the tests run as root, a user does not.
# Not run: `make demo`/`make test` (this suite is part of make test), the admin's `make install`
# (done here into the temporary prefix; site.bats checks it), scripts/cluster.sh (cluster.bats).

load helpers

setup_file() {
  export VERSION=$(cat "$ROOT/VERSION")
  export PREFIX=$BATS_FILE_TMPDIR/opt/slurm-train/$VERSION
  make -C "$ROOT" --no-print-directory BUILD="$BUILD" install PREFIX="$PREFIX" >/dev/null
  start_test_cluster --nodes 2 --gpus 2
}

teardown_file() {
  stop_test_cluster
}

# login_shell FOLDER BASH-ARGS...: a clean login shell in FOLDER with only this cluster's
# SLURM_CONF, the short runs' setting and the harness's sanitizer settings (SANITIZE=1) carried.
login_shell() {
  local folder=$1 sanitizer=() v
  shift
  for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose \
    PMIX_MCA_mca_base_component_disable_dlclose; do
    [ -z "${!v:-}" ] || sanitizer+=("$v=${!v}")
  done
  (cd "$folder" && timeout 900 env -i HOME="$HOME" TERM=dumb PATH=/usr/local/bin:/usr/bin:/bin \
    SLURM_CONF="$SLURM_CONF" SLURM_TRAIN_TRAIN_STEPS=100 OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "${sanitizer[@]}" bash -l "$@" 2>&1)
}

# split_blocks FILE OUTDIR [SECTION]: the run blocks as OUTDIR/NN.sh and NN.marker, appended.
split_blocks() {
  mkdir -p "$2"
  $PY "$BATS_TEST_DIRNAME/doc_blocks.py" split "$@"
}

# run_blocks BLOCKS FOLDER: every block of BLOCKS in order, in FOLDER, each in its own clean
# login shell (with the module loaded first unless the block loads it), from a file; a block
# marked "as typed" on the shell's standard input instead, with srun told not to read it
# (SLURM_STDINMODE=none: srun forwards its standard input to the tasks, and would eat the lines
# that a user types only once it is done).
run_blocks() {
  local blocks=$1 folder=$2 b marker script
  for b in "$blocks"/*.sh; do
    marker=$(cat "${b%.sh}.marker")
    echo "== $(basename "$b"): $marker"
    if [[ $marker == *"once the jobs have ended"* ]]; then wait_for_empty_queue || return 1; fi
    script=${b%.sh}.run
    {
      echo "set -e"
      grep -q '^module load' "$b" || printf 'module use %q\nmodule load slurm-train\n' "$PREFIX/modulefiles"
      sed "s|/opt/slurm-train/$VERSION/|$PREFIX/|g" "$b"
    } >"$script"
    if [[ $marker == "run as typed"* ]]; then
      login_shell "$folder" -s < <(echo "export SLURM_STDINMODE=none"; cat "$script") || return 1
    else
      login_shell "$folder" "$script" </dev/null || return 1
    fi
  done
}

wait_for_empty_queue() {
  local deadline=$((SECONDS + ${1:-600}))
  while [ -n "$(squeue -h 2>/dev/null)" ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

@test "every command block of the README and the examples says whether docs.bats runs it, and why not" {
  run $PY "$BATS_TEST_DIRNAME/doc_blocks.py" unmarked "$ROOT/README.md" "$ROOT"/examples/*.md
  echo "blocks without a docs.bats marker: $output"
  [ "$status" -eq 0 ]
  # A "not run" says why.
  run grep -n '<!-- docs.bats: not run -->' "$ROOT/README.md" "$ROOT"/examples/*.md
  [ "$status" -eq 1 ]
}

@test "README 'For users' as written: module use and load, copy, import, submit; then the log and the chart" {
  work=$BATS_TEST_TMPDIR/user blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/README.md" "$blocks" "For users"
  grep -q "^module use /opt/slurm-train/$VERSION/modulefiles" "$blocks/01.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(ls "$blocks"/*.sh | wc -l)" -eq 2 ]
  [[ $output == *"submitted job "* ]]
  [[ $output == *"final: test_acc"* ]]
  [[ $output == *"wrote curves.png (1 run(s))"* ]]
  grep -q "training .* on 2 rank(s), 100 steps" "$work"/logs/slurm-train-*.out
  [ "$(head -c 4 "$work/curves.png" | od -An -c | tr -d ' ')" = '211PNG' ]
  cp "$work/curves.png" "$BUILD/test/docs-curves.png"  # kept for a look
}

@test "README 'Training' and 'Checkpoints' as written, in a folder with the examples" {
  work=$BATS_TEST_TMPDIR/training blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  cp -r "$PREFIX/share/slurm-train/examples" "$work/examples"
  split_blocks "$ROOT/README.md" "$blocks" "Training"
  split_blocks "$ROOT/README.md" "$blocks" "Checkpoints"
  grep -q "^sbatch examples/fashion-mnist.sbatch" "$blocks/01.sh"
  grep -q "^slurm-train ckpt verify ckpt" "$blocks/02.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"on 1 rank(s), 100 steps"* ]]
  [ "$(grep -c 'on 2 rank(s), 100 steps' <<<"$output")" -eq 2 ]  # srun and mpirun
  [[ $output == *"Submitted batch job"* ]]
  [[ $output == *"layer1.weight"* ]]  # ckpt show
  wait_for_empty_queue
  grep -q "on 2 rank(s), 100 steps" "$work"/fashion-mnist-*.out
  grep -q "^final: test_acc" "$work"/fashion-mnist-*.out
}

@test "examples/interactive.md as written: srun from the login node, salloc, --train-verbose" {
  work=$BATS_TEST_TMPDIR/interactive blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/examples/interactive.md" "$blocks"
  grep -q "^salloc " "$blocks/03.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"on 2 rank(s), 100 steps"* ]]
  [[ $output == *"train.lr "*"= 0.001"* ]]  # --print-config
  [[ $output == *"on 4 rank(s), 100 steps"* ]]
  [ "$(grep -c '^spank_train: host node[12] rank [0-3] ' <<<"$output")" -eq 4 ]
}

@test "man slurm-train lists every subcommand, every run and exec option and every configuration key" {
  page=$(groff -man -Tascii -rLL=2000n -rHY=0 "$PREFIX/share/man/man1/slurm-train.1" | col -b)
  st=$PREFIX/bin/slurm-train
  subcommands=() options=() keys=() missing=()
  for cmd in "" data ckpt; do
    while read -r name _; do subcommands+=("${cmd:+$cmd }$name"); done \
      < <($st $cmd --help | sed -n '/^Subcommands:/,/^$/p' | sed '1d;/^$/d')
  done
  read -ra options < <($st run --help | sed -n '/^Options:/,/^$/p' | grep -oE '^  (-[a-z],)?--[a-z-]+' |
    sed 's/.*,//; s/^ *//' | grep -vx -- --help | paste -sd' ')
  read -ra exec_options < <($st exec --help | sed -n '/^Options:/,/^$/p' | grep -oE '^  (-[a-z],)?--[a-z-]+' |
    sed 's/.*,//; s/^ *//' | grep -vx -- --help | paste -sd' ')
  [ ${#exec_options[@]} -ge 6 ]
  options+=("${exec_options[@]}")
  read -ra keys < <($st run --print-config | awk '{print $1}' | paste -sd' ')
  echo "subcommands: ${subcommands[*]}"
  echo "run options: ${options[*]}"
  echo "keys: ${keys[*]}"
  [ ${#subcommands[@]} -ge 10 ] && [ ${#options[@]} -ge 8 ] && [ ${#keys[@]} -ge 40 ]
  # A subcommand is a heading of COMMANDS (at the start of its line); an option or a key is named.
  for s in "${subcommands[@]}"; do grep -qE "^ {7}$s( |$)" <<<"$page" || missing+=("command '$s'"); done
  for n in "${options[@]}" "${keys[@]}"; do grep -qF -- "$n" <<<"$page" || missing+=("$n"); done
  echo "missing from the man page: ${missing[*]}"
  [ ${#missing[@]} -eq 0 ]
  # Configuration from the environment and Prometheus.
  [[ $page == *"SLURM_TRAIN_SECTION_KEY"* ]]
  [[ $page == *"Precedence: built-in default < file < environment < command line"* ]]
  [[ $page == *"Prometheus textfile-collector"* ]]
}

@test "a value that names a subcommand is a value: --ckpt.dir ckpt, as the README writes it" {
  run "$PREFIX/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --ckpt.dir ckpt --print-config
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"ckpt.dir               = 'ckpt'"* ]]
  run "$PREFIX/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --log-dir plot --print-config
  [ "$status" -eq 0 ]
}
