#!/usr/bin/env bats
# Configuration errors under srun -n4: found before MPI starts, printed once (by rank 0), exit 2
# on every rank, no MPI_Abort banners; --print-config and --dry-run printed once.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

setup() {
  set_small_args
}

@test "srun -n4: a bad value, a missing data file and a missing save folder are one message each, exit 2" {
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.eps inf
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c "train.eps = 'inf': expected a finite number" <<<"$output")" -eq 1 ]
  [[ $output == *"(found alike by all 4 ranks before MPI started; reported by rank 0)"* ]]
  [[ $output != *"MPI_ABORT"* ]]
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" \
    --data.train "$BATS_TEST_TMPDIR/none.h5"
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c "cannot open HDF5 file '$BATS_TEST_TMPDIR/none.h5'" <<<"$output")" -eq 1 ]
  [[ $output != *"MPI_ABORT"* ]]
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" \
    --train.save "$BATS_TEST_TMPDIR/missing/model.h5"
  echo "$output"
  [ "$status" -eq 2 ]
  [ "$(grep -c "train.save = '$BATS_TEST_TMPDIR/missing/model.h5': its folder" <<<"$output")" -eq 1 ]
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.stpes 1
  [ "$status" -eq 2 ]
  [ "$(grep -c "unknown option '--train.stpes'" <<<"$output")" -eq 1 ]
}

@test "srun -n4: --print-config and --dry-run print one copy" {
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --print-config
  [ "$status" -eq 0 ]
  [ "$(grep -c '^train.lr ' <<<"$output")" -eq 1 ]
  run timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --dry-run
  [ "$status" -eq 0 ]
  [ "$(grep -c 'dry run: ready to train' <<<"$output")" -eq 1 ]
}
