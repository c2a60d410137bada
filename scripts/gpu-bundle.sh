#!/usr/bin/env bash
# gpu-bundle.sh OUT: everything scripts/gpu-check.sh needs on a GPU machine that has an NVIDIA
# driver and CUDA 13 libraries (a CUDA install or PyTorch's nvidia-* wheels) but no MPI, HDF5 or
# OpenBLAS: (`make gpu-bundle` builds first and writes build/gpu-bundle)
#   bin/      gpu_check, cuda-tests, slurm-train (stripped of debug info)
#   lib/      every shared library they link, as ldd resolves it here, except the C library
#             family (the target's own must be used), the driver (libcuda, libnvidia-*) and the
#             CUDA toolkit's (libcudart, libnccl, and libcublasLt, which the programs open on first
#             use: 800 MB; found on the target by bin/run, see there)
#   data/     Fashion-MNIST's four IDX files, and the fortunes corpus's tokens (data/fortunes,
#             about 1 MB), when this machine has them (GPU_BUNDLE_DATA=none: no data; gpu-check.sh
#             then needs --data and --tokens)
#   gpu-check.sh, torch_gpu_mlp.py, torch_gpt_gpu.py (the PyTorch peers), tensorboard_events.py
#             (the decoder gpu-check compares with TensorBoard's reader), fashion-mnist.toml and
#             gpt-tiny.toml (the configurations it runs), run (the wrapper: LD_LIBRARY_PATH, then the program)
# and OUT.tar.xz of it, with its size (a device session carries at most 64 MiB;
# GPU_BUNDLE_ARCHIVE=none: the folder only).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUT=${1:?usage: gpu-bundle.sh OUT}
DATA_DIR=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

programs=("$BUILD/bench/gpu_check" "$BUILD/test/cuda-tests" "$BUILD/bin/slurm-train")
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "gpu-bundle: $p is missing: run make gpu-bundle (a CUDA build)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
for p in "${programs[@]}"; do
  strip --strip-debug -o "$OUT/bin/$(basename "$p")" "$p"
done

# The libraries as this machine resolves them, minus what the target must supply itself.
skip='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so|/ld-linux|/libnvidia'
mapfile -t libs < <(for p in "${programs[@]}"; do ldd "$p"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
for lib in "${libs[@]}"; do
  if [[ $lib =~ $skip ]]; then continue; fi
  cp -L "$lib" "$OUT/lib/"
done
missing=$(for p in "${programs[@]}"; do ldd "$p"; done | grep 'not found' | grep -vE 'libcu|libnccl' || true)
[ -z "$missing" ] || { echo "gpu-bundle: unresolved libraries here: $missing" >&2; exit 1; }

if [ "${GPU_BUNDLE_DATA:-idx}" != none ] && [ -d "$DATA_DIR" ]; then
  mkdir -p "$OUT/data/fashion-mnist"
  cp "$DATA_DIR"/*-ubyte* "$OUT/data/fashion-mnist/"
fi
if [ "${GPU_BUNDLE_DATA:-idx}" != none ]; then
  "$BUILD/bin/slurm-train" data import fortunes --out "$OUT/data/fortunes" >/dev/null 2>&1 ||
    echo "gpu-bundle: no fortunes corpus here (apt-get install fortunes): gpu-check.sh will need --tokens" >&2
fi
cp "$ROOT/scripts/gpu-check.sh" "$ROOT/bench/torch_gpu_mlp.py" "$ROOT/bench/torch_gpt_gpu.py" \
  "$ROOT/test/integration/tensorboard_events.py" \
  "$ROOT/examples/fashion-mnist.toml" "$ROOT/examples/gpt-tiny.toml" "$OUT/"

# bin/run PROGRAM ARGS: the bundle's libraries first, then the target's CUDA 13 libraries, found
# once in CUDA_LIB_DIRS (if set), /usr/local/cuda*/lib64, the dynamic linker's cache, or the
# nvidia-* wheels beside PyTorch, and remembered in bin/.cuda-lib-dirs.
cat >"$OUT/bin/run" <<'RUN'
#!/usr/bin/env bash
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
find_cuda_dirs() {
  local want=(libcudart.so.13 libcublasLt.so.13 libnccl.so.2) dirs=() name d found
  local given=${CUDA_LIB_DIRS:-}
  local candidates=(${given//:/ } /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu)
  local py
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null || continue
    mapfile -t -O "${#candidates[@]}" candidates < <("$py" - <<'PY' 2>/dev/null || true
import os, sys
for entry in sys.path:
    root = os.path.join(entry, "nvidia")
    if not os.path.isdir(root):
        continue
    for dirpath, dirnames, filenames in os.walk(root):
        if any(f.startswith(("libcudart.so", "libcublas", "libnccl.so")) for f in filenames):
            print(dirpath)
PY
)
    break
  done
  for name in "${want[@]}"; do
    found=
    for d in "${candidates[@]}"; do
      [ -e "$d/$name" ] && { found=$d; break; }
    done
    [ -n "$found" ] || { echo "run: $name not found (set CUDA_LIB_DIRS to the folder that has it)" >&2; return 1; }
    [[ " ${dirs[*]} " == *" $found "* ]] || dirs+=("$found")
  done
  (IFS=:; echo "${dirs[*]}")
}
cache=$HERE/bin/.cuda-lib-dirs
[ -s "$cache" ] || find_cuda_dirs >"$cache" || { rm -f "$cache"; exit 1; }
export LD_LIBRARY_PATH=$HERE/lib:$(cat "$cache")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
program=$1
shift
exec "$HERE/bin/$program" "$@"
RUN
chmod +x "$OUT/bin/run"

if [ "${GPU_BUNDLE_ARCHIVE:-tar.xz}" = none ]; then
  echo "gpu-bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
  exit 0
fi
tar -C "$(dirname "$OUT")" -cJf "$OUT.tar.xz" "$(basename "$OUT")"
echo "gpu-bundle: $OUT ($(du -sh "$OUT" | cut -f1)), $OUT.tar.xz ($(du -h "$OUT.tar.xz" | cut -f1))"
echo "gpu-bundle: on the GPU machine: tar xJf $(basename "$OUT").tar.xz && $(basename "$OUT")/gpu-check.sh"
