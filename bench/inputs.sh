# inputs.sh, sourced by the benchmark scripts that run on the local cluster (BUILD and ROOT set).
#   fashion_mnist_dir   prints the folder of Fashion-MNIST's train.h5 and test.h5: data/ when
#                       `make demo` imported it there, else under BUILD/bench (imported once)
#   cluster_plugin      prints the SPANK plugin the cluster loads: this build's, or none
fashion_mnist_dir() {
  local data=$ROOT/data/fashion-mnist
  if [[ ! -f $data/train.h5 || ! -f $data/test.h5 ]]; then
    data=$BUILD/bench/fashion-mnist
    [[ -f $data/test.h5 ]] || "$BUILD/bin/slurm-train" data import fashion-mnist --out "$data" >/dev/null
  fi
  echo "$data"
}
cluster_plugin() {
  if [[ -f $BUILD/lib/spank_train.so ]]; then echo "$BUILD/lib/spank_train.so"; else echo none; fi
}
