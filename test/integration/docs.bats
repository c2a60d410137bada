#!/usr/bin/env bats
# The documentation, run as written: the command blocks of the README, of every file of docs/ and
# of examples/interactive.md, each file's blocks in order in a fresh folder and each block in one
# clean login shell (Lmod from /etc/profile.d) with the module of a `make install` into a
# temporary prefix, on a local two-node cluster. A `<!-- docs.bats: ... -->` line before each
# block says whether it runs (doc_blocks.py reads them). What the harness adds, and only this:
# - SLURM_TRAIN_TRAIN_STEPS=100 in the environment, as docs/development.md says, to keep the runs
#   short;
# - the site's prefix in the README's `module use` (/opt/slurm-train/VERSION) is the test's;
# - `set -e`, so that a failing line fails its file; the module loaded first where the block
#   does not load it itself; a copy of the installed examples/ in the folder of a file whose
#   blocks are marked so; a wait for an empty queue before a block marked so (a user waits);
# - OMPI_ALLOW_RUN_AS_ROOT*: the tests run as root, a user does not.
# Not run, each marked with the reason: `make demo`/`make test` (this suite is part of make
# test), the admin's `make install` (done here into the temporary prefix; site.bats checks it),
# scripts/cluster.sh (cluster.bats), the GPT's full training (gpt_run.bats), gpu-check.sh (a GPU).
# Besides: every relative link of the README, docs/ and the examples names a file (and heading)
# that exists, and the README links every file of docs/.

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

# login_shell FOLDER BASH-ARGS...: a new user's clean login shell (user_home) in FOLDER, with only
# this cluster's SLURM_CONF, the short runs' setting and the harness's sanitizer settings
# (SANITIZE=1) carried.
login_shell() {
  local folder=$1 sanitizer=() v
  shift
  for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose \
    PMIX_MCA_mca_base_component_disable_dlclose; do
    [ -z "${!v:-}" ] || sanitizer+=("$v=${!v}")
  done
  (cd "$folder" && timeout 900 env -i HOME="$(user_home)" TERM=dumb PATH=/usr/local/bin:/usr/bin:/bin \
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
# that a user types only once it is done). A block marked to run beside a copy of examples/
# finds the installed examples there.
run_blocks() {
  local blocks=$1 folder=$2 b marker script
  for b in "$blocks"/*.sh; do
    [ -e "$b" ] || continue
    marker=$(cat "${b%.sh}.marker")
    echo "== $(basename "$b"): $marker"
    if [[ $marker == *"copy of examples/"* && ! -d $folder/examples ]]; then
      cp -r "$PREFIX/share/slurm-train/examples" "$folder/examples"
    fi
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

# The files whose blocks have a test of their own below; every other file of docs/ is run by
# "the run blocks of every other file of docs/".
DOCS_WITH_TESTS="users.md checkpoints.md"

wait_for_empty_queue() {
  local deadline=$((SECONDS + ${1:-600}))
  while [ -n "$(squeue -h 2>/dev/null)" ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

# The blocks' python3 is the login shell's: Debian's, with python3-torch and python3-numpy
# (scripts/install-deps.sh), unless the site's profile puts another first.
need_torch() {
  local found
  login_shell "$BATS_TEST_TMPDIR" -c 'python3 -c "import numpy, torch"' >/dev/null && return 0
  found=$(login_shell "$BATS_TEST_TMPDIR" -c 'command -v python3')
  skip "the login shell's python3 ($found) cannot import numpy and torch (Debian's python3-torch and python3-numpy, scripts/install-deps.sh)"
}

@test "every command block of the README, docs/ and the examples says whether docs.bats runs it, and why not" {
  run $PY "$BATS_TEST_DIRNAME/doc_blocks.py" unmarked "$ROOT/README.md" "$ROOT"/docs/*.md "$ROOT"/examples/*.md
  echo "blocks without a docs.bats marker: $output"
  [ "$status" -eq 0 ]
  # A "not run" says why.
  run grep -n '<!-- docs.bats: not run -->' "$ROOT/README.md" "$ROOT"/docs/*.md "$ROOT"/examples/*.md
  [ "$status" -eq 1 ]
}

@test "docs/architecture.md names every folder of the tree (test fixtures and fuzz seeds aside)" {
  cd "$ROOT"
  missing=()
  while read -r folder; do
    grep -qF "$folder/" docs/architecture.md || missing+=("$folder/")
  done < <(git ls-files | grep -vE '^test/fixtures/|^test/fuzz/seeds/' | xargs -n1 dirname | sort -u | grep -vx '\.')
  echo "folders docs/architecture.md does not name: ${missing[*]}"
  [ "${#missing[@]}" -eq 0 ]
}

@test "every relative link of the README, docs/ and the examples names a file and a heading that exist; the README links every file of docs/" {
  run $PY "$BATS_TEST_DIRNAME/doc_blocks.py" links "$ROOT/README.md" "$ROOT"/docs/*.md "$ROOT"/examples/*.md
  echo "broken links: $output"
  [ "$status" -eq 0 ]
  run $PY "$BATS_TEST_DIRNAME/doc_blocks.py" unlinked "$ROOT/README.md" "$ROOT"/docs/*.md
  echo "files of docs/ that the README does not link: $output"
  [ "$status" -eq 0 ]
}

@test "README 'A first training' as written: module use and load, copy, import, submit; then the log and the chart" {
  work=$BATS_TEST_TMPDIR/user blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/README.md" "$blocks" "A first training"
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

@test "README 'Your own script' as written: the PyTorch DDP example under slurm-train exec on two nodes" {
  need_torch
  work=$BATS_TEST_TMPDIR/exec blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/README.md" "$blocks" "Your own script"
  [ "$(ls "$blocks"/*.sh | wc -l)" -eq 1 ]
  grep -q "slurm-train exec -- python3 pytorch_ddp.py" "$blocks/01.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"step 60/60 loss"* ]]
  [[ $output == *"final loss "* ]]
  for r in 0 1 2 3; do grep -q "rank $r: done (exit 0)" "$work"/slurm-train-logs/*/rank-$r.log; done
}

@test "the README's run blocks are all in the sections that the tests above run" {
  split_blocks "$ROOT/README.md" "$BATS_TEST_TMPDIR/all"
  split_blocks "$ROOT/README.md" "$BATS_TEST_TMPDIR/tested" "A first training"
  split_blocks "$ROOT/README.md" "$BATS_TEST_TMPDIR/tested" "Your own script"
  [ "$(ls "$BATS_TEST_TMPDIR"/all/*.sh | wc -l)" -eq "$(ls "$BATS_TEST_TMPDIR"/tested/*.sh | wc -l)" ]
}

@test "docs/users.md as written, in a folder with the examples: import, run alone, under srun and mpirun, sbatch" {
  work=$BATS_TEST_TMPDIR/users blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/docs/users.md" "$blocks"
  grep -q "^sbatch examples/fashion-mnist.sbatch" "$blocks/01.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"on 1 rank(s), 100 steps"* ]]
  [ "$(grep -c 'on 2 rank(s), 100 steps' <<<"$output")" -eq 2 ]  # srun and mpirun
  [[ $output == *"Submitted batch job"* ]]
  wait_for_empty_queue
  grep -q "on 2 rank(s), 100 steps" "$work"/fashion-mnist-*.out
  grep -q "^final: test_acc" "$work"/fashion-mnist-*.out
}

@test "docs/checkpoints.md as written: a run with checkpoints, then ckpt list, show and verify" {
  work=$BATS_TEST_TMPDIR/checkpoints blocks=$BATS_TEST_TMPDIR/blocks
  mkdir -p "$work"
  split_blocks "$ROOT/docs/checkpoints.md" "$blocks"
  grep -q "^slurm-train ckpt verify ckpt" "$blocks/01.sh"
  run run_blocks "$blocks" "$work"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"on 1 rank(s), 100 steps"* ]]
  [[ $output == *"layer1.weight"* ]]                   # ckpt show
  [[ $output == *"1 of 1 checkpoint(s) valid"* ]]      # ckpt verify
  [ "$(cat "$work/ckpt/latest")" = step-00000100.h5 ]
}

@test "the run blocks of every other file of docs/ as written, each file in a folder of its own" {
  local f name ran=0
  for f in "$ROOT"/docs/*.md; do
    name=$(basename "$f")
    [[ " $DOCS_WITH_TESTS " != *" $name "* ]] || continue
    split_blocks "$f" "$BATS_TEST_TMPDIR/blocks-$name"
    mkdir -p "$BATS_TEST_TMPDIR/work-$name"
    run run_blocks "$BATS_TEST_TMPDIR/blocks-$name" "$BATS_TEST_TMPDIR/work-$name"
    echo "docs/$name: $output"
    [ "$status" -eq 0 ]
    ran=$((ran + $(ls "$BATS_TEST_TMPDIR/blocks-$name" | grep -c '\.sh$' || true)))
  done
  echo "run blocks in the other files of docs/: $ran"
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

@test "a value that names a subcommand is a value: --ckpt.dir ckpt, as docs/checkpoints.md writes it" {
  run "$PREFIX/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --ckpt.dir ckpt --print-config
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"ckpt.dir               = 'ckpt'"* ]]
  run "$PREFIX/bin/slurm-train" run --config "$ROOT/examples/fashion-mnist.toml" --log-dir plot --print-config
  [ "$status" -eq 0 ]
}
