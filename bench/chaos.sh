#!/usr/bin/env bash
# chaos.sh (make bench): one training job survives CHAOS_FAULTS (default 8) faults of mixed kinds,
# injected from outside at random steps, and ends with the parameters of an uninterrupted run, bit
# for bit. On the local Slurm cluster, 2 + CHAOS_FAULTS nodes in network namespaces (every fault
# here is a node's: each leaves its node out, a spare takes its place): the reference MLP
# (examples/fashion-mnist.toml, global batch 250) trains CHAOS_STEPS (default 2000) steps on 2
# ranks under `slurm-train srun --spare-nodes CHAOS_FAULTS`, checkpoints every 50 steps. The
# kinds, each as often as the count allows, in a random order:
#   rank-kill    a rank SIGKILLed (rank 0 or 1)
#   hang         a rank SIGSTOPped: it holds its connections but makes no progress
#   node-kill    every process in a training node's network namespace, its slurmd included
#   unreachable  a training node's link taken down: its processes live on, cut off
# A node-level fault never hits the batch script's node (node1), whose loss ends any Slurm job.
# Fault i fires when the attempt after i faults reaches a random step of the i-th part of the run
# (so each attempt trains before the next fault). The seed is printed; CHAOS_SEED repeats a run;
# CHAOS_KINDS (comma-separated) fixes the kinds' order, CHAOS_RANKS the ranks they hit.
#
# Prints each fault (kind, step, node, what the supervisor named), each recovery time (failure to
# the new step's first training step; median and maximum), the steps lost (each at most
# ckpt.every), and the job's effective training time: the time of the steps that the final
# parameters keep over the job's wall time (Llama 3's pre-training reports over 90%), and what
# that would be at one failure every 3 hours. With CHAOS_BENCH_ROWS=1, only make bench's rows.
# Exit 1 when the job did not end bit-identical to the uninterrupted run or a fault was missed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/results.sh"
source "$ROOT/bench/inputs.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
FAULTS=${CHAOS_FAULTS:-8}
STEPS=${CHAOS_STEPS:-2000}
EVERY=50
SEED=${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
PORT=${CHAOS_BENCH_PORT:-6947}  # neither the demo's (6917), the start-up bench's (6927) nor the tests' (6937)
DIR=$BUILD/bench/chaos-cluster
W=$BUILD/bench/chaos
PY=/usr/bin/python3
cd "$ROOT"
die() { echo "chaos.sh: $*" >&2; exit 1; }
[[ $FAULTS =~ ^[0-9]+$ ]] && ((FAULTS >= 1 && FAULTS <= 14)) ||
  die "CHAOS_FAULTS='$FAULTS': expected a whole number from 1 to 14 (the cluster has at most 16 nodes)"
[[ $STEPS =~ ^[0-9]+$ ]] && ((STEPS >= (FAULTS + 1) * 3 * EVERY)) ||
  die "CHAOS_STEPS='$STEPS': expected a whole number of at least $(((FAULTS + 1) * 3 * EVERY)) ($((3 * EVERY)) a fault)"
[[ -x $BUILD/bin/slurm-train ]] || die "build $BUILD/bin/slurm-train first (make bench)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

data=$(fashion_mnist_dir)
plugin=$(cluster_plugin)
nodes=$((FAULTS + 2))
# Fresh: the cluster of an earlier run has its faults' nodes dead or cut off.
scripts/cluster.sh stop --dir "$DIR" >/dev/null 2>&1 || true
scripts/cluster.sh start --dir "$DIR" --port "$PORT" --nodes "$nodes" --plugin "$plugin" >/dev/null
trap 'scripts/cluster.sh stop --dir "$DIR" >/dev/null 2>&1 || true' EXIT
eval "$(scripts/cluster.sh env --dir "$DIR")"
rm -rf "$W"
mkdir -p "$W"

bin=$BUILD/bin/slurm-train
args=(--config "$ROOT/examples/fashion-mnist.toml" --data.train "$data/train.h5" --data.test "$data/test.h5"
  --train.metrics "" --train.global_batch 250 --train.steps "$STEPS" --train.device cpu)

# The uninterrupted run that the job must equal, on two nodes of the same cluster.
t0=$(date +%s.%N)
srun --mpi=pmix -N2 --ntasks-per-node=1 "$bin" run "${args[@]}" --log-dir= --train.save "$W/straight.h5" \
  >"$W/straight.out" 2>&1 || { cat "$W/straight.out" >&2; die "the uninterrupted run failed"; }
straight_wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')

# The plan: kinds in a random order, and the step each fault waits for.
RANDOM=$SEED
if [[ -n ${CHAOS_KINDS:-} ]]; then
  IFS=, read -r -a kinds <<<"$CHAOS_KINDS"
  ((${#kinds[@]} == FAULTS)) || die "CHAOS_KINDS='$CHAOS_KINDS': expected $FAULTS kinds"
else
  all=(rank-kill hang node-kill unreachable)
  kinds=()
  for ((i = 0; i < FAULTS; i++)); do kinds+=("${all[i % 4]}"); done
  for ((i = FAULTS - 1; i > 0; i--)); do
    j=$((RANDOM % (i + 1)))
    tmp=${kinds[i]} kinds[i]=${kinds[j]} kinds[j]=$tmp
  done
fi
ranks=()
[[ -z ${CHAOS_RANKS:-} ]] || IFS=, read -r -a ranks <<<"$CHAOS_RANKS"
((${#ranks[@]} == 0 || ${#ranks[@]} == FAULTS)) || die "CHAOS_RANKS='$CHAOS_RANKS': expected $FAULTS ranks (0 or 1)"
part=$((STEPS / (FAULTS + 1)))
at=()
for ((i = 0; i < FAULTS; i++)); do
  # Past the part's first checkpoint, so that each attempt trains before its fault.
  at+=($((i * part + part / 2 + RANDOM % (part / 2))))
done

out=$W/job.out
{
  echo '#!/bin/bash'
  echo "#SBATCH --nodes=$nodes --no-kill --ntasks-per-node=1 --output=$out"
  printf '%q ' "$bin" srun --spare-nodes "$FAULTS" --restarts "$((FAULTS + 2))" --start-timeout 30 --log-dir "$W/logs" \
    -- --mpi=pmix \
    --ntasks-per-node=1 "$bin" run "${args[@]}" --ckpt.dir "$W/ck" --ckpt.every "$EVERY" --train.save "$W/chaos.h5" \
    --train.log_every 5 --hang-timeout 3 --log-dir "$W/logs"
  echo
} >"$W/job.sh"
job=$(sbatch --parsable "$W/job.sh")
[[ ${CHAOS_BENCH_ROWS:-0} = 1 ]] ||
  echo "chaos: job $job, $STEPS steps on 2 of $nodes nodes, $FAULTS faults (seed $SEED): ${kinds[*]} at steps ${at[*]}"

# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 when it never did.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}
finished() { grep -q 'slurm-train srun: .* restart(s) inside the job' "$out" 2>/dev/null; }
# The current attempt's output: from its "step on" or "restart N of" line on.
attempt_text() { awk -v n="$1" '/^slurm-train srun: (step on|restart [0-9]+ of)/ { a++ } a == n + 1' "$out" 2>/dev/null; }
attempt_started() { attempt_text "$1" | grep -Eq '^  rank +1  host'; }
attempt_reached() { attempt_text "$1" | awk -v s="$2" '/^step [0-9]+\// { split($2, p, "/"); if (p[1] + 0 >= s) f = 1 } END { exit !f }'; }
# ready FIRST STEP: the newest attempt (cur), FIRST or later, trains and has reached STEP. A step
# can also fail of itself (a start-up that times out): the faults follow the newest attempt.
ready() {
  cur=$(($(grep -Ec '^slurm-train srun: (step on|restart [0-9]+ of)' "$out" 2>/dev/null || true) - 1))
  ((cur >= $1)) && attempt_started "$cur" && attempt_reached "$cur" "$2"
}

faults=()
next=0
for ((i = 0; i < FAULTS; i++)); do
  kind=${kinds[i]} step=${at[i]}
  ready_or_over() { ready "$next" "$step" || finished; }
  wait_for 300 ready_or_over || { cat "$out" >&2; die "no attempt reached step $step for fault $((i + 1))"; }
  finished && { grep '^slurm-train srun: ' "$out" >&2; die "the job ended before fault $((i + 1))"; }
  declare -A host=() pid=()
  while read -r rank h p; do host[$rank]=$h pid[$rank]=$p; done < <(attempt_text "$cur" |
    sed -n 's/^  rank \+\([0-9]\+\)  host \([^ ]*\)  pid \([0-9]\+\) .*/\1 \2 \3/p')
  rank=$((RANDOM % 2))
  [[ ${#ranks[@]} = 0 ]] || rank=${ranks[i]}
  if [[ $kind = node-kill || $kind = unreachable ]] && [[ ${host[$rank]} = node1 ]]; then rank=$((1 - rank)); fi
  node=${host[$rank]}
  n=${node#node}
  case $kind in
    rank-kill) kill -KILL "${pid[$rank]}" ;;
    hang) kill -STOP "${pid[$rank]}" ;;
    node-kill) kill -KILL $(ip netns pids "sltr$PORT-$node") ;;
    unreachable) ip link set "sltr${PORT}v$n" down ;;
    *) die "CHAOS_KINDS: '$kind' is not a kind (rank-kill, hang, node-kill, unreachable)" ;;
  esac
  faults+=("$cur $kind $step $rank $node")
  next=$((cur + 1))
  [[ ${CHAOS_BENCH_ROWS:-0} = 1 ]] || echo "chaos: fault $((i + 1)): $kind, rank $rank on $node, at step $step"
done
wait_for 600 finished || { cat "$out" >&2; die "the job did not finish"; }
[[ ${CHAOS_BENCH_ROWS:-0} = 1 ]] || grep '^slurm-train srun: ' "$out"

identical=yes
h5diff "$W/straight.h5" "$W/chaos.h5" /model /model >"$W/h5diff.out" 2>&1 || identical=no
summary=$("$PY" - "$W/logs/$job/restarts.jsonl" "$EVERY" "$straight_wall" "$identical" "${faults[@]}" <<'EOF'
import json, statistics, sys
record, every, straight_wall, identical = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
# Each fault: the attempt it hit, its kind, step, rank and node.
faults = {int(f.split()[0]): f.split()[1:] for f in sys.argv[5:]}
a = [json.loads(line) for line in open(record)]
failed, last = a[:-1], a[-1]
problems = []
if last["cause"] != "done":
    problems.append(f"the job ended with {last['cause']}: {last['message']}")
missed = sorted(set(faults) - {f["attempt"] for f in failed})
if missed:
    problems.append(f"the attempt(s) {missed} that a fault hit did not fail")
rows = []
for i, (f, r) in enumerate(zip(failed, a[1:])):
    what = (f"{f['cause']} on {f['node'] or '?'}, left out {','.join(f['left_out']) or 'none'}; "
            f"{f['steps_lost']} steps lost; recovered in {r['recovery_seconds']:.1f} s")
    if f["attempt"] not in faults:
        # Not injected: the job's own failure (a start-up that timed out), recovered as any other.
        rows.append(f"   attempt {f['attempt']}: not a fault of this script: {what} ({f['message']})")
        continue
    kind, step, rank, node = faults[f["attempt"]]
    n = sorted(faults).index(f["attempt"]) + 1
    rows.append(f"   fault {n}: {kind:<11} rank {rank} on {node} near step {step}: named {what}")
    if f["node"] != node:
        problems.append(f"fault {n} ({kind} on {node}) was blamed on {f['node'] or 'no node'}")
    if not 0 <= f["steps_lost"] <= every:
        problems.append(f"fault {n} lost {f['steps_lost']} steps (more than ckpt.every {every})")
recoveries = [r["recovery_seconds"] for r in a[1:] if r["recovery_seconds"] > 0]
# The steps the final parameters keep: each attempt's from where it started to where the next one
# resumed (all of the last); their time, each attempt's training time in proportion.
kept = 0.0
for i, s in enumerate(a):
    done = s["step_reached"] - s["started_from"]
    # Where the next attempt that trained resumed (one that never connected resumed nothing).
    resumed = next((b["started_from"] for b in a[i + 1:] if b["first_step_unix"] > 0), s["step_reached"])
    keep = resumed - s["started_from"]
    if done > 0 and s["first_step_unix"] > 0:
        kept += (s["ended_unix"] - s["first_step_unix"]) * keep / done
wall = last["ended_unix"] - a[0]["started_unix"]
lost = [f["steps_lost"] for f in failed]
step_seconds = (last["ended_unix"] - last["first_step_unix"]) / max(1, last["step_reached"] - last["started_from"])
cost = statistics.mean(recoveries) + statistics.mean(lost) * step_seconds if recoveries and lost else 0
print("rows<<")
print("\n".join(rows))
print(f"median {statistics.median(recoveries) if recoveries else -1:.2f}")
print(f"max {max(recoveries) if recoveries else -1:.2f}")
print(f"lost_max {max(lost) if lost else -1}")
print(f"lost_sum {sum(lost)}")
print(f"effective {kept / wall:.3f}")
print(f"wall {wall:.1f}")
print(f"at3h {1 - cost / (3 * 3600):.5f}")
print(f"problems {len(problems)}")
for p in problems:
    print(f"problem {p}")
EOF
)
value() { sed -n "s/^$1 //p" <<<"$summary"; }
median=$(value median) max=$(value max) effective=$(value effective) wall=$(value wall)
bench_record chaos_recovery_median "$median"
bench_record chaos_recovery_max "$max"
bench_record chaos_effective "$effective"
bench_record chaos_lost_max "$(value lost_max)"
row() {
  local target verdict
  read -r target verdict <<<"$(bench_verdict "$1" "$3" "${4:-}" | sed 's/^\([<>]=\) /\1/')"
  printf '%-52s %12s %12s %8s %8s  %s\n' "$2" "$3" "${4:--}" "-" "$target" "$verdict $5"
}
row chaos_recovery_median "chaos: $FAULTS faults, recovery s, median" "$median" "" "(maximum $max s; failure to the new step's first step)"
row chaos_recovery_max "chaos: recovery s, maximum" "$max" "" ""
row chaos_effective "chaos: effective training time" "$effective" "" \
  "(kept steps' time over the job's $wall s; uninterrupted $(printf %.1f "$straight_wall") s; $(value at3h) at a failure every 3 h)"
row chaos_lost_max "chaos: steps lost per fault, at most" "$(value lost_max)" "" "($(value lost_sum) in all; ckpt.every $EVERY)"
printf '%-52s %12s %12s %8s %8s  %s\n' "chaos: final parameters against the uninterrupted run" \
  "$([[ $identical = yes ]] && echo identical || echo DIFFERENT)" "-" "-" "-" "(h5diff /model; seed $SEED)"
if [[ ${CHAOS_BENCH_ROWS:-0} != 1 ]]; then
  sed -n '/^rows<</,/^median /p' <<<"$summary" | sed '1d;$d'
fi
sed -n 's/^problem /chaos: /p' <<<"$summary" >&2
[[ $identical = yes && $(value problems) = 0 ]]
