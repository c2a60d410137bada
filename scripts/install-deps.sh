#!/usr/bin/env bash
# install-deps.sh: install the Debian 12 packages slurm-train needs to build, test and demo,
# only those missing. Silent and quick when nothing is missing.
#
#   scripts/install-deps.sh            the project's packages
#   scripts/install-deps.sh PKG...     only these (used by the tests; handy for extras)
#
# Not root and something missing: prints the exact apt-get line to run and exits 1.
set -euo pipefail

# One group a line: what needs it.
readonly PROJECT_PACKAGES=(
  g++ make pkg-config                                      # build
  slurmctld slurmd slurm-client libslurm-dev munge         # local cluster, SPANK plugin
  libmunge-dev libssl-dev                                  # the watchdog's proofs and seals
  libopenmpi-dev openmpi-bin libpmix-dev                   # MPI, srun --mpi=pmix
  libhdf5-openmpi-dev hdf5-tools zlib1g-dev                # datasets, checkpoints (HDF5)
  libopenblas-dev                                          # CPU matrix products
  libcli11-dev libtomlplusplus-dev libfmt-dev nlohmann-json3-dev libhwloc-dev
  doctest-dev bats iproute2 util-linux                     # tests, multi-node cluster
  dataset-fashion-mnist                                    # the real training data
  fortunes                                                 # a plain-text corpus (data import fortunes)
  python3-torch python3-h5py python3-numpy                 # PyTorch tests and peer, h5py checks
  clang-14 libclang-rt-14-dev clang-format                 # make fuzz (libFuzzer, sanitizers), the format check
  lmod gnuplot-nox man-db python3-prometheus-client        # module, plot, man pages; checks the .prom file
  prometheus prometheus-node-exporter                      # the real-Prometheus test (docs/monitoring.md)
  libboost1.81-dev                                         # serve's HTTP (Boost.Beast, header-only)
  libcpp-httplib-dev python3-flask curl                    # serve's benchmark: its client, its peer; docs/serving.md
)

if [ $# -gt 0 ]; then wanted=("$@"); else wanted=("${PROJECT_PACKAGES[@]}"); fi
for p in "${wanted[@]}"; do
  [[ $p =~ ^[a-z0-9][a-z0-9.+-]*$ ]] || { echo "install-deps.sh: '$p' is not a Debian package name" >&2; exit 2; }
done

# One dpkg-query for all: fast. Packages it does not know are missing too.
installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${wanted[@]}" 2>/dev/null |
  awk '$1 == "ii" { print $2 }') || true
missing=()
for p in "${wanted[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

install_line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps.sh: run as root: $install_line" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt_log=$(mktemp)
trap 'rm -f "$apt_log"' EXIT
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1; then
  tail -n 20 "$apt_log" >&2
  echo "install-deps.sh: apt-get failed; the command was: $install_line" >&2
  exit 1
fi
echo "install-deps.sh: done" >&2
