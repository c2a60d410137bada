#!/usr/bin/env bash
# run.sh (make bench): runs the benchmark programs in build/bench and prints their table.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them (see README).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
echo "== make bench on $(hostname): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$BUILD/bench/sgemm_ceiling"
