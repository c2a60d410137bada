// libFuzzer target: the checkpoint reader, verifier and `ckpt show` on any file (seeds: real
// checkpoints written by `slurm-train run`; the fuzzer mutates them). Each of the three reads
// the file on its own, so each runs whatever the others did.
#include "test/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint_file.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::limit_contained_reads();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file(".h5");
  const std::string& path = file.write(data, size);
  fuzz::rejecting_cleanly([&] { read_checkpoint_file(path); });
  fuzz::rejecting_cleanly([&] { verify_checkpoint_file(path); });
  fuzz::rejecting_cleanly([&] { describe_checkpoint_file(path); });
  return 0;
}
