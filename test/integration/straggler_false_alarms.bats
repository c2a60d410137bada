#!/usr/bin/env bats
# make test: alone
# Clean runs name no straggler: the judge's 1.2x threshold holds against the ranks' own noise. It
# runs with no other test file beside it (the marker above): another file's load on one node
# slows that node's rank for real, and the judge would be right to name it.

load helpers

setup_file() {
  ensure_fashion_mnist
  start_test_cluster --nodes 2
}

teardown_file() {
  stop_test_cluster
}

@test "five clean two-rank runs name no straggler" {
  set_small_args
  for i in 1 2 3 4 5; do
    # Longer than the three windows of 2 s a rank must be slow for, on a fast machine too: every
    # rank's steps alike at least 3 ms (slow@3 on all ranks).
    run srun --mpi=pmix -N2 --ntasks-per-node=1 "$BUILD/bin/slurm-train" run "${SMALL[@]}" --train.steps 2400 \
      --inject-fault slow@3
    [ "$status" -eq 0 ]
    [[ $output =~ after\ 2400\ steps\ in\ ([0-9.]+)\ s ]]
    echo "run $i: ${BASH_REMATCH[1]} s"
    awk -v s="${BASH_REMATCH[1]}" 'BEGIN { exit !(s >= 6) }'
    [[ $output != *straggler* ]]
  done
}
