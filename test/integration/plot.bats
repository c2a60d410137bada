#!/usr/bin/env bats
# slurm-train plot draws with the real gnuplot: runs shaped like the reference configuration's
# (3510 steps, an evaluation per epoch of 234 steps, test accuracy 84-89.5%), one and several.
# The chart's script itself is checked by the unit tests (test/unit/plot_chart_test.cc).

load helpers

# write_run FILE SEED [RUN]: a run's metrics as `slurm-train run` writes them, appended to FILE,
# each line naming the run RUN when given (the job id).
write_run() {
  $PY - "$1" "$2" "${3:-}" <<'EOF'
import json, math, random, sys
path, seed, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
tag = {"run": run} if run else {}
with open(path, "a") as f:
    for step in range(1, 3511):
        acc = 0.9 - 0.8 * math.exp(-step / 60) + rng.gauss(0, 0.02)
        f.write(json.dumps({**tag, "step": step, "epoch": (step - 1) // 234 + 1, "loss": 0.55 + 1.8 * math.exp(-step / 60),
                            "accuracy": min(1, acc), "samples_per_s": 2500 + rng.gauss(0, 200)}) + "\n")
        if step % 234 == 0:
            e = step // 234
            f.write(json.dumps({**tag, "eval": {"epoch": e, "step": step, "test_loss": 0.45 - 0.01 * e,
                                         "test_accuracy": 0.84 + 0.055 * (e - 1) / 14 + 0.001 * seed}}) + "\n")
EOF
}

png_size() {
  $PY -c "
import struct, sys
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', data[:8]
print('%dx%d' % struct.unpack('>II', data[16:24]))" "$1"
}

@test "plot draws one run named by its folder, and several runs of a sweep on one chart" {
  cd "$BATS_TEST_TMPDIR"
  mkdir -p fm sweep/lr-0.001 sweep/lr-0.002
  write_run fm/metrics.jsonl 0
  write_run sweep/lr-0.001/metrics.jsonl 1
  write_run sweep/lr-0.002/metrics.jsonl 2
  run "$BUILD/bin/slurm-train" plot fm/metrics.jsonl -o one.png
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "wrote one.png (1 run(s))" ]
  [ "$(png_size one.png)" = 1200x1100 ]
  run "$BUILD/bin/slurm-train" plot sweep/*/metrics.jsonl -o sweep.png --title "it's a sweep"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "wrote sweep.png (2 run(s))" ]
  [ "$(png_size sweep.png)" = 1200x1100 ]
  mkdir -p "$BUILD/test"
  cp one.png "$BUILD/test/plot-one.png"  # kept for a look
  cp sweep.png "$BUILD/test/plot-sweep.png"
}

@test "plot draws a run without evaluations" {
  cd "$BATS_TEST_TMPDIR"
  write_run all.jsonl 0
  grep -v '"eval"' all.jsonl >steps-only.jsonl
  run "$BUILD/bin/slurm-train" plot steps-only.jsonl -o steps.png
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(png_size steps.png)" = 1200x1100 ]
}

@test "plot draws the runs of one file that two jobs appended to as two runs, each labelled with its job id" {
  cd "$BATS_TEST_TMPDIR"
  mkdir fm
  write_run fm/metrics.jsonl 0 4101
  write_run fm/metrics.jsonl 3 4102
  run "$BUILD/bin/slurm-train" plot fm/metrics.jsonl -o mixed.png
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "wrote mixed.png (2 run(s))" ]
  [ "$(png_size mixed.png)" = 1200x1100 ]
  mkdir -p "$BUILD/test"
  cp mixed.png "$BUILD/test/plot-mixed.png"  # kept for a look
}

@test "plot draws a run whose id holds a newline and a gnuplot command, with the real gnuplot: the command never runs" {
  cd "$BATS_TEST_TMPDIR"
  # A run id, as a metrics line may carry it, that would end its statement and run a command.
  mkdir fm
  write_run fm/metrics.jsonl 0 $'4101\nprint system("touch '"$BATS_TEST_TMPDIR"$'/ran-id")\n'
  run "$BUILD/bin/slurm-train" plot fm/metrics.jsonl -o id.png
  echo "$output"
  [ ! -e ran-id ]
  [ "$status" -eq 0 ]
  [ "$output" = "wrote id.png (1 run(s))" ]
  [ "$(png_size id.png)" = 1200x1100 ]
}

@test "plot draws a run whose folder's name holds a newline and a gnuplot command, with the real gnuplot: the command never runs" {
  cd "$BATS_TEST_TMPDIR"
  # The folder's name is the run's. A name holds no '/': the command would run in the working folder.
  evil=$'lr-0.1\nprint system("touch ran-folder")\n'
  mkdir "$evil" lr-0.2
  write_run "$evil/metrics.jsonl" 1
  write_run lr-0.2/metrics.jsonl 2
  run "$BUILD/bin/slurm-train" plot "$evil/metrics.jsonl" lr-0.2/metrics.jsonl -o folder.png
  echo "$output"
  [ ! -e ran-folder ]
  [ "$status" -eq 0 ]
  [ "$output" = "wrote folder.png (2 run(s))" ]
  [ "$(png_size folder.png)" = 1200x1100 ]
}

@test "plot draws a title that holds a newline and a gnuplot command as text, and writes to an output named '|command' rather than running it" {
  cd "$BATS_TEST_TMPDIR"
  write_run m.jsonl 0
  run "$BUILD/bin/slurm-train" plot m.jsonl -o title.png --title $'it\'s\nprint system("touch ran-title")'
  echo "$output"
  [ ! -e ran-title ]
  [ "$status" -eq 0 ]
  [ "$(png_size title.png)" = 1200x1100 ]
  # gnuplot pipes its output into a command when the name starts with '|'.
  run "$BUILD/bin/slurm-train" plot m.jsonl -o '|touch ran-pipe'
  echo "$output"
  [ ! -e ran-pipe ]
  [ "$status" -eq 0 ]
  [ "$(png_size '|touch ran-pipe')" = 1200x1100 ]
}

@test "plot refuses an output path with a newline, naming it, and runs nothing" {
  cd "$BATS_TEST_TMPDIR"
  write_run m.jsonl 0
  run --separate-stderr "$BUILD/bin/slurm-train" plot m.jsonl -o $'c.png\nprint system("touch ran-output")\n'
  echo "$output"; echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr == *"the output path (-o) 'c.png\\x0aprint system(\"touch ran-output\")\\x0a' holds a control character (byte 5 is \\x0a): expected a path without one"* ]]
  ls
  [ ! -e ran-output ]
  [ -z "$(ls -d c.png* 2>/dev/null)" ]  # no chart either
}
