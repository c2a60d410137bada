// A labelled dataset read from HDF5: a features dataset [N, ...] of uint8 or float32 and an
// integer labels dataset [N], both named in the configuration. The whole dataset is held in
// memory (Fashion-MNIST's 47 MB of bytes); features stay in their stored type and are
// normalised when a batch is assembled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/io/memory_budget.h"

namespace slurm_train {

struct DatasetSpec {
  std::string path;
  std::string features = "/images";
  std::string labels = "/labels";
  int num_classes = 10;
};

struct Dataset {
  std::string path;
  std::size_t count = 0;                  // N
  std::size_t feature_size = 0;           // product of the dimensions after the first
  std::vector<std::uint8_t> features_u8;  // one of these two holds N * feature_size values
  std::vector<float> features_f32;
  std::vector<std::int32_t> labels;
  int num_classes = 0;

  bool is_uint8() const { return !features_u8.empty(); }
  // Feature j of sample i, as stored (uint8 scaled to [0, 1]).
  float raw(std::size_t i, std::size_t j) const {
    const std::size_t k = i * feature_size + j;
    return is_uint8() ? features_u8[k] * (1.0f / 255.0f) : features_f32[k];
  }
};

// What a dataset's file promises, read from its metadata alone.
struct DatasetLayout {
  std::vector<std::uint64_t> shape;  // of the features
  std::size_t count = 0;
  std::size_t feature_size = 0;
  bool uint8_features = false;                 // otherwise read as float32
  std::optional<std::uint64_t> feature_bytes;  // in memory; nullopt: beyond 64 bits
};

// Opens the file and checks shapes and element types (N equal in both) without reading the
// data: the check a run does on every rank before it starts. Errors name the file and dataset.
DatasetLayout inspect_dataset(const DatasetSpec& spec);

// The first pass of opening (crash_contained.h) for several files in one separate process, so
// that a run's training and test sets cost one: a file it finds sound, unchanged since, is not
// probed again in this process by inspect_dataset or load_dataset. When it fails nothing is
// recorded, and each file is then probed alone, the bad one named, where it is used.
void probe_datasets(const std::vector<DatasetSpec>& specs);

// Throws MemoryError naming the file and dataset when its features do not fit `memory`.
void require_dataset_memory(const DatasetSpec& spec, const DatasetLayout& layout, const MemoryFacts& memory);

// Reads and validates: what inspect_dataset checks, that the features fit in memory before they
// are allocated, every float feature finite and every label in [0, classes). Errors name the
// file, the dataset and the first bad sample. Both read the file in a child process first, so
// that a file that crashes or hangs libhdf5 is an error, not a crash (crash_contained.h): its
// metadata once per process, and the whole of it where it is chunked or filtered.
Dataset load_dataset(const DatasetSpec& spec);
Dataset load_dataset(const DatasetSpec& spec, const MemoryFacts& memory);

// Per-feature-set normalisation: out = (raw - mean) / stddev, computed once from the
// training set and applied to every split.
struct Normalization {
  float mean = 0.0f, inv_stddev = 1.0f;
};
Normalization normalization_of(const Dataset& d);

// In the separate process that the readers above start first (crash_contained.h): runs the
// read `reader` names ("dataset-open", "dataset-load") with its arguments and returns true;
// false for another name or arguments.
bool run_dataset_probe(const std::string& reader, const std::vector<std::string>& args);

}  // namespace slurm_train
