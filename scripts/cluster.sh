#!/usr/bin/env bash
# cluster.sh: a real, private Slurm 22.05 cluster on this machine (munged, slurmctld, slurmd),
# for tests, the demo and trying slurm-train without a site cluster.
#
# Every file (configs, state, spool, logs, sockets, munge key, fake GPU devices) lives under one
# folder. With --nodes N > 1 each node is a slurmd in its own network namespace, with its own
# hostname and address on a bridge this script creates, so that multi-node steps really cross
# "hosts". `stop` ends exactly what `start` started and removes the namespaces and the bridge.
set -euo pipefail

readonly ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  cat <<EOF
usage: scripts/cluster.sh COMMAND [OPTIONS]

Commands:
  start    start the cluster (a no-op when it already runs with the same shape)
  stop     cancel its jobs, end its daemons and every process of its steps, remove its
           network namespaces and bridge
  status   show its daemons and nodes; exit 0 when it runs, 3 when it does not
  env      print the line to eval in a shell: eval "\$(scripts/cluster.sh env)"

Options (start):
  --nodes N        nodes (default 1); N > 1 puts each slurmd in its own network namespace
  --gpus G         fake GPUs per node through gres.conf (default 0)
  --cpus C         CPUs each node declares (default 4; Slurm is told to trust the config)
  --port P         slurmctld port; slurmd uses P+1 (default 6917)
  --plugin PATH    the spank_train.so to register in plugstack.conf (default
                   \$SLURM_TRAIN_CLUSTER_PLUGIN, else build/lib/spank_train.so when it
                   exists; "none": no plugin)
  --plugstack-args "ARGS"
                   arguments for spank_train.so in plugstack.conf (default none)
Options (all commands):
  --dir DIR        the cluster's folder (default: \$SLURM_TRAIN_CLUSTER_DIR, else build/cluster)
EOF
}

die() { echo "cluster.sh: error: $*" >&2; exit 1; }
note() { echo "cluster.sh: $*" >&2; }

# ---- arguments ------------------------------------------------------------------------------
cmd=${1:-}
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
case "$cmd" in -h|--help|help) usage; exit 0 ;; esac

nodes=1 gpus=0 cpus=4 port=6917 plugstack_args="" plugin=${SLURM_TRAIN_CLUSTER_PLUGIN:-$ROOT/build/lib/spank_train.so}
dir=${SLURM_TRAIN_CLUSTER_DIR:-$ROOT/build/cluster}
is_count() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
while [ $# -gt 0 ]; do
  opt=$1
  [ $# -ge 2 ] || die "option $opt needs a value (see --help)"
  val=$2
  case "$opt" in
    --nodes) is_count "$val" 1 16 || die "--nodes '$val': expected a whole number from 1 to 16"; nodes=$val ;;
    --gpus) is_count "$val" 0 16 || die "--gpus '$val': expected a whole number from 0 to 16"; gpus=$val ;;
    --cpus) is_count "$val" 1 256 || die "--cpus '$val': expected a whole number from 1 to 256"; cpus=$val ;;
    --port) is_count "$val" 1024 65000 || die "--port '$val': expected a port from 1024 to 65000"; port=$val ;;
    --dir) [ -n "$val" ] || die "--dir: expected a folder"; dir=$val ;;
    --plugstack-args) [[ $val != *$'\n'* ]] || die "--plugstack-args: must be one line"; plugstack_args=$val ;;
    --plugin)
      [ "$val" = none ] || [ -f "$val" ] || die "--plugin '$val': expected the path of spank_train.so or 'none'"
      [[ $val != *[[:space:]]* ]] || die "--plugin '$val': plugstack.conf paths cannot hold blanks"
      plugin=$val ;;
    *) die "unknown option '$opt' (see --help)" ;;
  esac
  shift 2
done
mkdir -p "$dir" 2>/dev/null || die "cannot create the cluster folder '$dir'"
dir=$(cd "$dir" && pwd)
readonly conf=$dir/etc/slurm.conf run=$dir/run log=$dir/log
# Network names and the subnet follow the port, so that two clusters on different ports (the
# demo's and the tests') can run side by side.
readonly BRIDGE=sltr$port SUBNET=10.231.$((port % 250))
export SLURM_CONF=$conf

# ---- helpers --------------------------------------------------------------------------------
node_name() { echo "node$1"; }
node_addr() { echo "$SUBNET.$((10 + $1))"; }
netns_of() { echo "sltr$port-$(node_name "$1")"; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Processes of this cluster: its daemons carry SLURM_TRAIN_CLUSTER=<dir> (set when they
# start); slurmstepd wipes its environment for its process title but keeps its node's log open
# under <dir>; the tasks and batch scripts of its jobs carry its SLURM_CONF and the
# SLURMD_NODENAME that slurmd gives them. This script and its callers are never included.
cluster_pids() {
  local p pid env ancestors=" " a=$BASHPID
  while [ "$a" -gt 1 ] 2>/dev/null; do
    ancestors+="$a "
    a=$(awk '/^PPid:/ {print $2}' "/proc/$a/status" 2>/dev/null || echo 0)
  done
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $ancestors == *" $pid "* ]] && continue
    env=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
    if grep -qxF "SLURM_TRAIN_CLUSTER=$dir" <<<"$env" ||
      { grep -qxF "SLURM_CONF=$conf" <<<"$env" && grep -q '^SLURMD_NODENAME=' <<<"$env"; } ||
      find "$p/fd" -lname "$dir/*" 2>/dev/null | grep -q .; then
      echo "$pid"
    fi
  done
  return 0
}

require_commands() {
  local missing=() c pkg
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 && continue
    case "$c" in
      slurmctld) pkg=slurmctld ;; slurmd|slurmstepd) pkg=slurmd ;;
      munged) pkg=munge ;; ip|ss|bridge) pkg=iproute2 ;; nsenter|unshare) pkg=util-linux ;;
      *) pkg=slurm-client ;;
    esac
    missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "missing ${missing[*]}: run scripts/install-deps.sh (or apt-get install ${missing[*]})"
}

port_busy() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
  note "$what"
}

show_log_tail() { [ -f "$1" ] && { echo "--- last lines of $1:" >&2; tail -n 15 "$1" >&2; }; return 0; }

shape() {
  printf 'nodes=%s\ngpus=%s\ncpus=%s\nport=%s\nplugstack_args=%q\nplugin=%q\n' \
    "$nodes" "$gpus" "$cpus" "$port" "$plugstack_args" "$plugin"
}

# ---- configuration --------------------------------------------------------------------------
write_config() {
  local ctl_addr i host nodelist
  mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$log" "$run" "$dir/pmix"
  host=$(hostname -s)
  if [ "$nodes" -gt 1 ]; then ctl_addr=$SUBNET.1; else ctl_addr=127.0.0.1; fi

  cat >"$conf" <<EOF
# Written by scripts/cluster.sh: a private test cluster. Every path lies under $dir.
ClusterName=slurmtrain
SlurmctldHost=$host($ctl_addr)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s):
# a local cluster launches steps in seconds, and the preemption tests requeue jobs.
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd-%n.pid
SlurmctldLogFile=$log/slurmctld.log
SlurmdLogFile=$log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
# Job ids of their own per port: two clusters running side by side on this machine never reuse
# each other's ids, which Open MPI and PMIx build shared-memory and socket names from.
FirstJobId=$(( (port % 1000) * 10000 + 1 ))
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=600
MessageTimeout=20
SlurmdTimeout=60
GresTypes=gpu
EOF
  nodelist=""
  for ((i = 1; i <= nodes; i++)); do
    local addr=127.0.0.1 gres=""
    [ "$nodes" -eq 1 ] || addr=$(node_addr "$i")
    [ "$gpus" -eq 0 ] || gres=" Gres=gpu:$gpus"
    echo "NodeName=$(node_name "$i") NodeAddr=$addr CPUs=$cpus RealMemory=1024$gres State=UNKNOWN" >>"$conf"
    nodelist+="${nodelist:+,}$(node_name "$i")"
  done
  echo "PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$conf"

  # Fake GPUs: character devices with NVIDIA's major number, never opened by anyone.
  : >"$dir/etc/gres.conf"
  echo "AutoDetect=off" >>"$dir/etc/gres.conf"
  if [ "$gpus" -gt 0 ]; then
    mkdir -p "$dir/dev"
    for ((i = 0; i < gpus; i++)); do
      [ -e "$dir/dev/nvidia$i" ] || mknod "$dir/dev/nvidia$i" c 195 "$i"
    done
    echo "Name=gpu File=$dir/dev/nvidia[0-$((gpus - 1))]" >>"$dir/etc/gres.conf"
  fi

  # pmix makes per-step folders under this base; each node bind-mounts its own folder here so
  # that two nodes on one file system do not collide.
  echo "PMIxCliTmpDirBase=$dir/pmix" >"$dir/etc/mpi.conf"

  : >"$dir/etc/plugstack.conf"
  if [ "$plugin" != none ] && [ -f "$plugin" ]; then
    echo "required $(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")${plugstack_args:+ $plugstack_args}" \
      >"$dir/etc/plugstack.conf"
  fi
  # Every node resolves every node's name, as on a site cluster (frameworks connect to
  # MASTER_ADDR=node1); each slurmd's private mount namespace sees this file as /etc/hosts.
  cat /etc/hosts >"$dir/etc/hosts"
  if [ "$nodes" -eq 1 ]; then
    echo "127.0.0.1 $(node_name 1)" >>"$dir/etc/hosts"
  else
    for ((i = 1; i <= nodes; i++)); do echo "$(node_addr "$i") $(node_name "$i")" >>"$dir/etc/hosts"; done
  fi
  shape >"$run/shape"
}

# ---- daemons --------------------------------------------------------------------------------
# Every user may reach munged's socket, as on a real cluster (tasks prove their user to task 0
# with a credential); only the key is private.
start_munge() {
  mkdir -p "$dir/munge"
  chmod 755 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
  munged --foreground --force --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$run/munged.pid" \
    --log-file="$log/munged.log" --seed-file="$dir/munge/munged.seed" >>"$log/munged.log" 2>&1 &
  echo $! >"$run/munged.pid"
  wait_for 10 "munged is up" test -S "$dir/munge/munge.socket" ||
    { show_log_tail "$log/munged.log"; die "munged did not start"; }
}

start_slurmctld() {
  port_busy "$port" && die "port $port (slurmctld) is already in use: pick another with --port"
  slurmctld -D -i -f "$conf" >>"$log/slurmctld.log" 2>&1 &
  echo $! >"$run/slurmctld.pid"
  wait_for 20 "slurmctld is up on port $port" scontrol ping ||
    { show_log_tail "$log/slurmctld.log"; die "slurmctld did not start"; }
}

# The namespaces and the bridge of a cluster on this port that was killed without `stop` (its
# folder may be gone, a test run's build tree say): they outlive its processes until reboot and
# would refuse every later multi-node start. Removed only when no process is left in them and
# nothing listens on the port: a cluster that runs, even in part, is never touched.
# The veths of bridge BRIDGE's nodes left in the root namespace (a namespace that ends while its
# link is down, or with sockets still closing, can leave its pair behind).
bridge_veths() { ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \($1v[0-9]*\)@.*/\1/p"; }

remove_stale_network() {
  local ns link stale=()
  mapfile -t stale < <(ip netns list 2>/dev/null | awk -v p="sltr$port-" 'index($1, p) == 1 {print $1}')
  ip link show "$BRIDGE" >/dev/null 2>&1 || [ ${#stale[@]} -gt 0 ] || [ -n "$(bridge_veths "$BRIDGE")" ] || return 0
  port_busy "$port" &&
    die "bridge $BRIDGE already exists: another cluster on port $port runs (stop it, or use --port)"
  for ns in "${stale[@]}"; do
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] ||
      die "network namespace $ns still has processes: another cluster on port $port runs (stop it, or use --port)"
  done
  note "removing the network of a cluster on port $port that ended without stop: $BRIDGE ${stale[*]}"
  for ns in "${stale[@]}"; do ip netns del "$ns" || die "cannot remove the network namespace $ns"; done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE" || die "cannot remove the bridge $BRIDGE"
  fi
  for link in $(bridge_veths "$BRIDGE"); do ip link del "$link" || die "cannot remove the link $link"; done
}

setup_network() {
  remove_stale_network
  ip -o -4 addr show | grep -q " $SUBNET\." &&
    die "subnet $SUBNET.0/24 is already in use on this machine: pick another --port"
  ip link add "$BRIDGE" type bridge
  echo "$BRIDGE" >"$run/bridge"
  ip addr add "$SUBNET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local i ns
  for ((i = 1; i <= nodes; i++)); do
    ns=$(netns_of "$i")
    ip netns list | grep -qw "^$ns" && die "network namespace $ns already exists"
    ip netns add "$ns"
    echo "$ns" >>"$run/netns"
    ip link add "sltr${port}v$i" type veth peer name eth0 netns "$ns"
    ip link set "sltr${port}v$i" master "$BRIDGE" up
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# Single node: slurmd in this network namespace, in a private mount namespace for /etc/hosts.
# Several: each in its own network, UTS and mount namespaces (nsenter, not `ip netns exec`,
# which remounts /sys and slurmd dies on that), with its own /dev/shm as a real host has.
start_slurmd() {
  local i name
  if [ "$nodes" -eq 1 ]; then
    port_busy $((port + 1)) && die "port $((port + 1)) (slurmd) is already in use: pick another with --port"
    name=$(node_name 1)
    mkdir -p "$dir/pmix/$name"
    unshare --mount --propagation private \
      /bin/sh -c 'mount --bind "$1" /etc/hosts && exec slurmd -D -N "$2" -f "$3"' \
      sh "$dir/etc/hosts" "$name" "$conf" >>"$log/slurmd-$name.out" 2>&1 &
    echo $! >"$run/slurmd-$name.pid"
    return
  fi
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    mkdir -p "$dir/pmix-nodes/$name"
    nsenter --net="/run/netns/$(netns_of "$i")" unshare --uts --mount --propagation private \
      /bin/sh -c 'hostname "$1" && mount --bind "$2" "$3" && mount --bind "$5" /etc/hosts &&
        mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec slurmd -D -N "$1" -f "$4"' \
      sh "$name" "$dir/pmix-nodes/$name" "$dir/pmix" "$conf" "$dir/etc/hosts" >>"$log/slurmd-$name.out" 2>&1 &
    echo $! >"$run/slurmd-$name.pid"
  done
}

nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%T' 2>/dev/null) || return 1
  [ "$(grep -c '^idle$' <<<"$states")" -eq "$nodes" ]
}

# ---- commands -------------------------------------------------------------------------------
is_running() { alive "$run/slurmctld.pid"; }

cmd_start() {
  [ "$(id -u)" -eq 0 ] || die "start needs root (slurmd runs as root; namespaces need CAP_SYS_ADMIN)"
  require_commands slurmctld slurmd slurmstepd munged srun sinfo scontrol ss unshare
  [ "$nodes" -eq 1 ] || require_commands ip nsenter
  if is_running; then
    [ "$(shape)" = "$(cat "$run/shape" 2>/dev/null)" ] ||
      die "a cluster with another shape already runs in $dir: stop it first"
    note "already running in $dir"
    return 0
  fi
  # A stale cluster (crashed daemons) is cleaned up first; state and spool are wiped together
  # so job ids and pmix sockets never go out of step.
  cmd_stop >/dev/null 2>&1 || true
  rm -rf "${dir:?}/state" "$dir/spool" "$dir/pmix" "$dir/pmix-nodes" "$log" "$run" "$dir/etc"
  mkdir -p "$log" "$run"
  # Whatever stops the start half way (a busy port, a daemon that will not come up), nothing
  # it started is left behind.
  trap 'note "start failed; stopping what it started"; cmd_stop >/dev/null 2>&1 || true' EXIT
  export SLURM_TRAIN_CLUSTER=$dir
  write_config
  start_munge
  [ "$nodes" -eq 1 ] || setup_network
  start_slurmctld
  start_slurmd
  if ! wait_for 60 "$nodes node(s) idle" nodes_idle; then
    sinfo -N -l >&2 || true
    for f in "$log"/slurmd-*; do show_log_tail "$f"; done
    die "the nodes did not become idle within 60 s"
  fi
  trap - EXIT
  note "running in $dir ($nodes node(s), $gpus GPU(s) each); use: eval \"\$(scripts/cluster.sh env)\""
}

signal_pids() { # signal_pids SIGNAL PID...
  local sig=$1
  shift
  [ $# -eq 0 ] || kill "-$sig" "$@" 2>/dev/null || true
}

jobs_active() { [ -n "$(squeue -h -o %i -t RUNNING,COMPLETING,SUSPENDED 2>/dev/null)" ]; }
daemons_alive() { local f; for f in "$run"/*.pid; do alive "$f" && return 0; done; return 1; }

cmd_stop() {
  # Jobs first, while the daemons can still end their steps cleanly.
  if is_running; then
    scancel --quiet --full -u root 2>/dev/null || true
    wait_for 10 "jobs ended" eval '! jobs_active' || note "jobs still active after 10 s; killing them"
  fi
  local f pids=()
  for f in "$run"/*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  signal_pids TERM "${pids[@]}"
  wait_for 5 "daemons ended" eval '! daemons_alive' || note "daemons still running after 5 s; killing them"
  # slurmstepd and tasks outlive slurmd and ignore SIGTERM: end whatever of this cluster remains.
  local deadline=$((SECONDS + 5))
  while mapfile -t pids < <(cluster_pids) && [ ${#pids[@]} -gt 0 ] && [ $SECONDS -lt $deadline ]; do
    signal_pids KILL "${pids[@]}"
    sleep 0.2
  done
  if [ -f "$run/netns" ]; then
    local ns
    while read -r ns; do
      signal_pids KILL $(ip netns pids "$ns" 2>/dev/null)
      ip netns del "$ns" 2>/dev/null || true
    done <"$run/netns"
    rm -f "$run/netns"
  fi
  if [ -f "$run/bridge" ]; then
    local bridge link
    bridge=$(cat "$run/bridge")
    ip link del "$bridge" 2>/dev/null || true
    for link in $(bridge_veths "$bridge"); do ip link del "$link" 2>/dev/null || true; done
    rm -f "$run/bridge"
  fi
  rm -f "$run"/*.pid
  mapfile -t pids < <(cluster_pids)
  if [ ${#pids[@]} -gt 0 ]; then
    echo "cluster.sh: error: processes still running after stop: ${pids[*]}" >&2
    return 1
  fi
  note "stopped"
}

cmd_status() {
  if ! is_running; then
    echo "not running ($dir)"
    return 3
  fi
  echo "running in $dir"
  local f
  for f in "$run"/*.pid; do
    [ -f "$f" ] || continue
    printf '  %-16s pid %-8s %s\n' "$(basename "$f" .pid)" "$(cat "$f")" \
      "$(alive "$f" && echo up || echo DOWN)"
  done
  sinfo -N -o '  %N %T %C %G'
}

case "$cmd" in
  start) cmd_start ;;
  stop) [ "$(id -u)" -eq 0 ] || die "stop needs root"; cmd_stop ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) usage >&2; die "unknown command '$cmd'" ;;
esac
