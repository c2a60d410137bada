// libFuzzer target: the IDX reader, plain or gzip-compressed (seeds: the first bytes of
// Fashion-MNIST's IDX files, plain and gzipped).
#include "test/fuzz/fuzz_support.h"
#include "train/data/idx.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file(".idx.gz");
  const std::string& path = file.write(data, size);
  fuzz::rejecting_cleanly([&] {
    IdxArray a = read_idx_ubyte(path, fuzz::kMemory);
    // What parse_idx_ubyte promises: the data is exactly the product of the dimensions.
    std::size_t n = a.dims.empty() ? 0 : 1;
    for (std::uint64_t d : a.dims) n *= d;
    if (a.data.size() != n) std::abort();
  });
  return 0;
}
