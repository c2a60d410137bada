#!/usr/bin/env bash
# demo.sh (make demo): the main job, end to end on a local Slurm cluster. Imports Fashion-MNIST
# into data/fashion-mnist (once), starts a two-node cluster (build/cluster), submits
# examples/fashion-mnist.sbatch (2 ranks, srun --mpi=pmix), follows the job's output and prints
# the final accuracy. The cluster keeps running afterwards for you to use.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
cd "$ROOT"
export PATH=$BUILD/bin:$PATH
# Safe in sandboxes and containers, where cross-memory attach is often not permitted.
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

# The demo shows the plugin at work: without it, it would train without what it exists to show.
plugin=$BUILD/lib/spank_train.so
if [ ! -f "$plugin" ]; then
  echo "demo: $plugin is missing; make demo builds it (it needs libslurm-dev's slurm/spank.h)" >&2
  exit 1
fi

if [ ! -f data/fashion-mnist/train.h5 ] || [ ! -f data/fashion-mnist/test.h5 ]; then
  echo "== importing Fashion-MNIST into data/fashion-mnist"
  slurm-train data import fashion-mnist --out data/fashion-mnist
fi

echo "== starting a 2-node Slurm cluster under build/cluster, with $plugin"
scripts/cluster.sh start --nodes 2 --gpus 2 --plugin "$plugin"
eval "$(scripts/cluster.sh env)"
sinfo -N -o '%N %T %C %G'
plugstack=$(dirname "$SLURM_CONF")/plugstack.conf
if ! grep -q "spank_train.so" "$plugstack"; then
  echo "demo: the cluster's $plugstack does not name spank_train.so" >&2
  exit 1
fi
echo "$plugstack: $(cat "$plugstack")"

echo
echo "== what the plugin sets for each task: srun -N2 -n2 --gres=gpu:2 --train-verbose true"
srun -N2 -n2 --gres=gpu:2 --train-verbose true 2>&1

echo
echo "== sbatch examples/fashion-mnist.sbatch (2 ranks, the reference configuration)"
job=$(sbatch --parsable --chdir="$ROOT" examples/fashion-mnist.sbatch)
out=$ROOT/fashion-mnist-$job.out
echo "job $job; output in $out"

# Follow the output until the job ends (sbatch --wait polls every 10 s; this is prompter).
shown=0
while :; do
  state=$(scontrol show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  if [ -f "$out" ]; then
    total=$(wc -l <"$out")
    [ "$total" -le "$shown" ] || { tail -n +"$((shown + 1))" "$out" | head -n "$((total - shown))"; shown=$total; }
  fi
  case "$state" in PENDING|CONFIGURING|RUNNING|COMPLETING) sleep 1 ;; *) break ;; esac
done
[ ! -f "$out" ] || tail -n +"$((shown + 1))" "$out"

echo
if [ "$state" != COMPLETED ]; then
  echo "demo: job $job ended $state; see $out" >&2
  exit 1
fi
echo "== job $job $state: $(grep '^final:' "$out")"
echo "Per-step metrics: $ROOT/metrics-$job.jsonl (a chart: slurm-train plot metrics-$job.jsonl -o curves.png)"
echo "The cluster keeps running: eval \"\$(scripts/cluster.sh env)\"; squeue. Stop it: scripts/cluster.sh stop"
