// libFuzzer target: the HDF5 dataset loader on any file (seeds: small datasets written by
// `slurm-train data import`), and the normalisation computed from what it accepted.
#include "test/fuzz/fuzz_support.h"
#include "train/data/dataset.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::limit_contained_reads();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file(".h5");
  DatasetSpec spec;
  spec.path = file.write(data, size);
  fuzz::rejecting_cleanly([&] {
    Dataset d = load_dataset(spec, fuzz::kMemory);
    // What load_dataset promises: N labelled samples of feature_size values, labels in range.
    if (d.labels.size() != d.count) std::abort();
    if ((d.is_uint8() ? d.features_u8.size() : d.features_f32.size()) != d.count * d.feature_size) std::abort();
    for (std::int32_t label : d.labels)
      if (label < 0 || label >= d.num_classes) std::abort();
    normalization_of(d);
  });
  return 0;
}
