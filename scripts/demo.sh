#!/usr/bin/env bash
# demo.sh (make demo): start a two-node local Slurm cluster with two fake GPUs a node and run a
# multi-node MPI step across it, showing where every rank runs. The training engine replaces the
# step with a real training once it lands. The cluster keeps running afterwards for you to use.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
cd "$ROOT"

echo "== starting a 2-node Slurm cluster (2 fake GPUs a node) under build/cluster"
scripts/cluster.sh start --nodes 2 --gpus 2
eval "$(scripts/cluster.sh env)"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
sinfo -N -o '%N %T %C %G'

echo
echo "== srun --mpi=pmix -N2 --ntasks-per-node=2 --gres=gpu:2 mpi_layout"
srun --mpi=pmix -N2 --ntasks-per-node=2 --gres=gpu:2 "$BUILD/test/mpi_layout"

echo
echo "The cluster keeps running. Use it from this shell with:"
echo "  eval \"\$(scripts/cluster.sh env)\"; srun -N2 -n4 hostname"
echo "Stop it with: scripts/cluster.sh stop"
