#!/usr/bin/env bats
# The two entry points a newcomer meets first: scripts/install-deps.sh and the Makefile.

load helpers

@test "install-deps.sh is silent and succeeds when nothing is missing" {
  run "$ROOT/scripts/install-deps.sh"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "install-deps.sh as a non-root user prints the exact apt-get line for what is missing" {
  # 'sl' (the steam locomotive) is a real Debian package this project never installs.
  dpkg-query -W -f='${db:Status-Abbrev}' sl 2>/dev/null | grep -q '^ii' && skip "package sl is installed here"
  run setpriv --reuid=65534 --regid=65534 --clear-groups "$ROOT/scripts/install-deps.sh" bats sl
  [ "$status" -ne 0 ]
  [[ $output == *"missing Debian packages: sl"* ]]
  [[ $output == *"run as root: apt-get install -y --no-install-recommends sl"* ]]
}

@test "install-deps.sh refuses a package name that is not one" {
  run "$ROOT/scripts/install-deps.sh" 'bats; rm -rf /'
  [ "$status" -eq 2 ]
  [[ $output == *"'bats; rm -rf /' is not a Debian package name"* ]]
}

@test "a missing library stops the build with one line naming the packages" {
  # pkg-config then finds none of the .pc files, as on a machine without the -dev packages.
  run env PKG_CONFIG_LIBDIR="$BATS_TEST_TMPDIR/empty" make -C "$ROOT" --no-print-directory \
    BUILD="$BATS_TEST_TMPDIR/build" all
  [ "$status" -ne 0 ]
  [[ ${lines[0]} == "error: missing libopenmpi-dev libhdf5-openmpi-dev libopenblas-dev libfmt-dev libssl-dev libmunge-dev libcpp-httplib-dev: run scripts/install-deps.sh"* ]]
  [ ! -d "$BATS_TEST_TMPDIR/build/obj" ]
}

@test "make demo builds the plugin in the make that runs after deps, and the demo refuses to run without it" {
  # demo-build, the second make's goal, names the plugin (the first make read the Makefile
  # before deps installed spank.h, so it cannot).
  run make -C "$ROOT" --no-print-directory -n BUILD="$BATS_TEST_TMPDIR/build" demo-build
  echo "$output" | tail -n 5
  [ "$status" -eq 0 ]
  [[ $output == *"$BATS_TEST_TMPDIR/build/lib/spank_train.so"* ]]
  run make -C "$ROOT" --no-print-directory -n demo
  [[ $output == *"demo-build"* ]]
  # Without the plugin, the demo stops before it starts a cluster, and says why.
  mkdir -p "$BATS_TEST_TMPDIR/noplugin/bin"
  ln -s "$BUILD/bin/slurm-train" "$BATS_TEST_TMPDIR/noplugin/bin/slurm-train"
  run env BUILD="$BATS_TEST_TMPDIR/noplugin" "$ROOT/scripts/demo.sh"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"demo: $BATS_TEST_TMPDIR/noplugin/lib/spank_train.so is missing"* ]]
  [[ $output != *"starting a 2-node Slurm cluster"* ]]
}

@test "make install puts the launcher and its documentation under DESTDIR/PREFIX" {
  run make -C "$ROOT" --no-print-directory BUILD="$BUILD" install DESTDIR="$BATS_TEST_TMPDIR/stage" PREFIX=/opt/slurm-train/test
  [ "$status" -eq 0 ]
  prefix=$BATS_TEST_TMPDIR/stage/opt/slurm-train/test
  [ -x "$prefix/bin/slurm-train" ]
  [ -f "$prefix/share/doc/slurm-train/README.md" ]
  # The guides the README links, where its links find them, and --help names.
  [ -f "$prefix/share/doc/slurm-train/docs/launcher.md" ]
  [ -f "$prefix/share/doc/slurm-train/docs/serving.md" ]
  run "$prefix/bin/slurm-train" --help
  [[ $output == *"share/doc/slurm-train/docs"* ]]
  run "$prefix/bin/slurm-train" --version
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "slurm-train $(cat "$ROOT/VERSION")" ]]
}

@test "slurm-train refuses an unknown argument, and asks for a subcommand" {
  run "$BUILD/bin/slurm-train" --no-such-option
  [ "$status" -eq 2 ]
  [[ $output == *"--no-such-option"* ]]
  run "$BUILD/bin/slurm-train"
  [ "$status" -eq 2 ]
  [[ $output == *"a subcommand is required (run, exec, srun, data, submit, plot, doctor, ckpt, sample, serve)"* ]]
}

@test "a CUDA build builds gpu_check, whose GPT benchmark says why it cannot run without a GPU" {
  if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
    skip "no nvcc: this build has no CUDA path"
  fi
  [ -x "$BUILD/bench/gpu_check" ]
  run "$BUILD/bench/gpu_check" gpt --help
  [ "$status" -eq 0 ]
  [[ $output == *"--no-flash-attention"* ]]
  if [ ! -e /dev/nvidiactl ]; then
    run "$BUILD/bench/gpu_check" gpt --steps 1
    [ "$status" -eq 1 ]
    [[ $output == *"gpu_check: error: CUDA call cudaGetDevice"* ]]
  fi
}

# cuBLASLt's static initializers take about 0.3 s and 200 MB as it loads (CUDA 13): linked, every
# command would pay that, exec's supervisor and --version included. It is opened on first use.
@test "a CUDA build starts without cuBLAS: no program links it, and slurm-train --version never opens it" {
  if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
    skip "no nvcc: this build has no CUDA path"
  fi
  for p in "$BUILD/bin/slurm-train" "$BUILD/bench/gpu_check" "$BUILD/test/cuda-tests" "$BUILD/test/unit-tests"; do
    run ldd "$p"
    [ "$status" -eq 0 ]
    [[ $output == *libcudart* ]]
    if [[ $output == *libcublas* ]]; then
      echo "$p links cuBLAS: $output"
      false
    fi
  done
  run env LD_DEBUG=files "$BUILD/bin/slurm-train" --version
  [ "$status" -eq 0 ]
  [[ $output == *"file=libcudart.so"* ]]
  [[ $output != *"file=libcublas"* ]]
}

# The GPU machine has a driver, CUDA and Python, but no Open MPI, HDF5 or OpenBLAS: its one
# session is not to be lost to a library the bundle forgot. In a mount namespace, Open MPI (its
# libraries, plugins and launchers), HDF5's MPI build, OpenBLAS and the libraries only they bring
# are hidden; the tree's own slurm-train then cannot start, and the bundle's must.
@test "make gpu-bundle's programs run where Open MPI, HDF5 and OpenBLAS are missing, as on the GPU machine" {
  if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
    skip "no nvcc: this build has no CUDA path"
  fi
  ensure_fashion_mnist
  set_small_args
  bundle=$BATS_TEST_TMPDIR/gpu-bundle
  run env BUILD="$BUILD" GPU_BUNDLE_DATA=none GPU_BUNDLE_ARCHIVE=none "$ROOT/scripts/gpu-bundle.sh" "$bundle"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -f "$bundle/lib/libmpi.so.40" ] && [ -f "$bundle/lib/libopenblas.so.0" ]
  run unshare --mount --propagation private bash -s "$BUILD" "$bundle" "$BATS_TEST_TMPDIR/ck" "${SMALL[@]}" <<'EOF_NS'
set -u
build=$1 bundle=$2 ck=$3
shift 3
L=/usr/lib/x86_64-linux-gnu
for d in $L/openmpi $L/hdf5/openmpi $L/openblas-pthread $L/blas $L/lapack /usr/share/openmpi /etc/openmpi $L/pmix2; do
  [ -d "$d" ] && mount -t tmpfs none "$d"
done
for f in $L/libhdf5_openmpi* $L/libmpi* $L/libopen-pal* $L/libopen-rte* $L/libopenblas* $L/libpmix* $L/libfmt* \
         $L/libhwloc* $L/libevent* $L/libgfortran* $L/libquadmath*; do
  [ -e "$f" ] && mount --bind /dev/null "$f"
done
for b in mpirun orted ompi_info; do
  p=$(command -v $b) && mount --bind /dev/null "$(readlink -f "$p")"
done
"$build/bin/slurm-train" --version >/dev/null 2>&1
echo "the tree's slurm-train: exit $?"
"$bundle/bin/run" slurm-train run "$@" --train.steps 4 --ckpt.dir "$ck" --ckpt.every 2 --run.progress lines 2>&1
echo "bundle run: exit $?"
"$bundle/bin/run" slurm-train ckpt verify "$ck" 2>&1
echo "bundle ckpt verify: exit $?"
"$bundle/bin/run" cuda-tests --no-version 2>&1 | grep '^\[doctest\] test cases:'
"$bundle/bin/run" gpu_check gpt --help >/dev/null
echo "bundle gpu_check: exit $?"
EOF_NS
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output != *"the tree's slurm-train: exit 0"* ]]
  [[ $output == *"the tree's slurm-train: exit 127"* ]]
  [[ $output == *"final: test_acc"* ]]
  [[ $output == *"bundle run: exit 0"* ]]
  [[ $output == *"bundle ckpt verify: exit 0"* ]]
  [[ $output =~ \[doctest\]\ test\ cases:\ +[0-9]+\ \|\ +[0-9]+\ passed\ \|\ +0\ failed ]]
  [[ $output == *"bundle gpu_check: exit 0"* ]]
}

# count_in OBJECT FUNCTION_PATTERN INSTRUCTION_PATTERN: how many of the instructions of the
# functions whose (demangled) name matches FUNCTION_PATTERN match INSTRUCTION_PATTERN.
count_in() {
  objdump -dC --no-show-raw-insn "$1" |
    awk -v f="$2" -v i="$3" '/^[0-9a-f]+ <.*>:$/ { name = $0; next } name ~ f && $0 ~ i { n++ } END { print n + 0 }'
}

@test "the CPU kernels' GELU and softmax loops are vectorized in their AVX2 clones" {
  # GCC keeps a loop scalar on AVX2 when one arm of a select could trap (no masked operations);
  # the kernels' -fno-trapping-math lets it vectorize them. Scalar, GELU took a third of a step.
  [[ $(uname -m) = x86_64 ]] || skip "the kernels' AVX2 clones are built on x86-64 only"
  local kernels=$BUILD/obj/kernels/cpu/cpu_kernels.o attention=$BUILD/obj/kernels/cpu/attention_gemm.o
  [ -f "$kernels" ] && [ -f "$attention" ]
  if nm "$kernels" | grep -q __asan_; then
    skip "sanitized build: the sanitizers' instrumentation keeps these loops scalar (the plain build is checked)"
  fi
  # 1 / (1 + z / 2) of Φ, eight lanes at a time; exp's 2^n built in eight exponents at a time.
  [ "$(count_in "$kernels" 'bias_activation_loop.*arch_x86_64_v3' 'vdivps .*ymm')" -gt 0 ]
  [ "$(count_in "$kernels" 'activation_backward_loop.*arch_x86_64_v3' 'vdivps .*ymm')" -gt 0 ]
  [ "$(count_in "$kernels" 'bias_gelu_loop.*arch_x86_64_v3' 'vdivps .*ymm')" -gt 0 ]
  # gelu_backward only multiplies and sums, eight lanes at a time.
  [ "$(count_in "$kernels" 'gelu_backward_loop.*arch_x86_64_v3' 'vmulps .*ymm')" -gt 0 ]
  [ "$(count_in "$attention" 'causal_softmax_row.*arch_x86_64_v3' 'vpslld .*ymm')" -gt 0 ]
}
