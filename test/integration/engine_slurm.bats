#!/usr/bin/env bats
# The engine under Slurm on a two-node local cluster: srun --mpi=pmix across nodes gives the
# same model as one process, and the sbatch example trains Fashion-MNIST to >= 89%.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

@test "srun --mpi=pmix -N2 -n4 and -n2 train the same model as one process (1e-5 after 50 steps)" {
  set_small_args
  "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 50 --train.save "$BATS_FILE_TMPDIR/one.h5" >/dev/null
  run srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 50 --train.save "$BATS_FILE_TMPDIR/four.h5"
  [ "$status" -eq 0 ]
  [[ $output == *"on 4 rank(s)"* ]]
  run $PY "$ROOT/test/integration/compare_models.py" "$BATS_FILE_TMPDIR/four.h5" "$BATS_FILE_TMPDIR/one.h5" 1e-5
  echo "$output"
  [ "$status" -eq 0 ]
  run srun --mpi=pmix -n2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 50 --train.save "$BATS_FILE_TMPDIR/two.h5"
  [ "$status" -eq 0 ]
  run $PY "$ROOT/test/integration/compare_models.py" "$BATS_FILE_TMPDIR/two.h5" "$BATS_FILE_TMPDIR/one.h5" 1e-5
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "an error on one rank under srun ends the job with a message naming rank and host" {
  set_small_args
  # A label outside the classes is found only when the data is read, after MPI started.
  run timeout 60 srun --mpi=pmix -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 50 --data.num_classes 5
  [ "$status" -ne 0 ]
  [[ $output == *"slurm-train: error: rank "*" of 2 on node"*"label "*" is outside [0, 5) (data.num_classes)"* ]]
}

@test "the sbatch example trains the reference configuration to at least 89% test accuracy" {
  workdir=$BATS_FILE_TMPDIR/submit
  # A user's submit folder: the examples, and the data where the example expects it.
  mkdir -p "$workdir/data"
  ln -s "$TEST_DATA" "$workdir/data/fashion-mnist"
  ln -s "$ROOT/examples" "$workdir/examples"
  run env PATH="$BUILD/bin:$PATH" sbatch --parsable --chdir="$workdir" "$ROOT/examples/fashion-mnist.sbatch"
  [ "$status" -eq 0 ]
  job=$output
  run wait_job "$job" 900
  cat "$workdir/fashion-mnist-$job.out"
  [ "$output" = COMPLETED ]
  final=$(grep '^final: test_acc' "$workdir/fashion-mnist-$job.out")
  [[ $final =~ test_acc\ ([0-9.]+)% ]]
  echo "accuracy ${BASH_REMATCH[1]}%"
  awk -v a="${BASH_REMATCH[1]}" 'BEGIN { exit !(a >= 89.0) }'
  [ "$(grep -c '^epoch ' "$workdir/fashion-mnist-$job.out")" -eq 15 ]
  [ "$(grep -c '"loss":' "$workdir/metrics-$job.jsonl")" -eq 3510 ]
  [ "$(grep -c '"eval"' "$workdir/metrics-$job.jsonl")" -eq 15 ]
}
