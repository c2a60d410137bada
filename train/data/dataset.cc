#include "train/data/dataset.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <set>
#include <tuple>

#include "train/io/crash_contained.h"
#include "train/io/h5.h"
#include "train/io/huge_pages.h"

namespace slurm_train {

namespace {

// A dataset's file and datasets, opened and checked, nothing read yet.
struct OpenedDataset {
  h5::Handle file, features, labels;
  std::string fctx, lctx;  // "path:/images", for errors
  DatasetLayout layout;
};

OpenedDataset open_dataset_files(const DatasetSpec& spec) {
  const std::string& path = spec.path;
  if (spec.num_classes < 2)
    throw std::invalid_argument(fmt::format("data: num_classes = {} (expected at least 2)", spec.num_classes));
  OpenedDataset o;
  o.file = h5::open_file(path, H5F_ACC_RDONLY);
  o.features = h5::open_dataset(o.file, spec.features, path);
  o.labels = h5::open_dataset(o.file, spec.labels, path);
  o.fctx = path + ":" + spec.features;
  o.lctx = path + ":" + spec.labels;

  const auto fshape = h5::dataset_shape(o.features, o.fctx);
  const auto lshape = h5::dataset_shape(o.labels, o.lctx);
  if (fshape.empty() || fshape[0] == 0)
    throw h5::Error(fmt::format("{}: the features dataset is empty (expected shape [N, ...])", o.fctx));
  if (lshape.size() != 1)
    throw h5::Error(fmt::format("{}: labels have {} dimensions (expected shape [N])", o.lctx, lshape.size()));
  if (lshape[0] != fshape[0])
    throw h5::Error(fmt::format("{} has {} samples but {} has {} labels", o.fctx, fshape[0], o.lctx, lshape[0]));

  h5::Handle ftype(H5_CHECK(H5Dget_type(o.features), o.fctx));
  const H5T_class_t fclass = H5_CHECK(H5Tget_class(ftype), o.fctx);
  o.layout.uint8_features = fclass == H5T_INTEGER && H5Tget_size(ftype) == 1 && H5Tget_sign(ftype) == H5T_SGN_NONE;
  if (!o.layout.uint8_features && fclass != H5T_FLOAT)
    throw h5::Error(fmt::format("{}: features must be uint8 or floating point", o.fctx));
  h5::Handle ltype(H5_CHECK(H5Dget_type(o.labels), o.lctx));
  if (H5Tget_class(ltype) != H5T_INTEGER) throw h5::Error(fmt::format("{}: labels must be integers", o.lctx));

  const std::vector<std::uint64_t> dims(fshape.begin(), fshape.end());
  const auto feature_size = checked_bytes({dims.begin() + 1, dims.end()}, 1);
  o.layout.feature_bytes = checked_bytes(dims, o.layout.uint8_features ? 1 : sizeof(float));
  o.layout.shape = dims;
  o.layout.count = fshape[0];
  o.layout.feature_size = feature_size.value_or(0);
  return o;
}

// Every feature finite: one NaN would make the normalisation, and so the whole training, NaN.
void require_finite(const std::vector<float>& values, std::size_t feature_size, const std::string& fctx) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  const auto k = static_cast<std::size_t>(bad - values.begin());
  throw h5::Error(
      fmt::format("{}: feature {} of sample {} is {} (expected finite numbers; float64 values beyond "
                  "float32's range read as inf)",
                  fctx, k % feature_size, k / feature_size, *bad));
}

// Refuses a file that crashes or hangs its reader in a child process (crash_contained.h).
void require_no_crash(const std::string& path, const ContainedRead& read) {
  if (const auto crash = crash_in_child(read, time_limit_to_read(path)))
    throw h5::Error(
        fmt::format("{}: reading it {} (a separate process reads it first: libhdf5 crashes or loops "
                    "forever on some damaged files); the file is damaged or not HDF5",
                    path, *crash));
}

// A DatasetSpec as a contained read's arguments, and back.
std::vector<std::string> spec_words(const DatasetSpec& spec) {
  return {spec.path, spec.features, spec.labels, std::to_string(spec.num_classes)};
}

// A file as it is on disk now: another file, or this one changed, is another identity. Only a
// file unchanged for a second has one: a change within the file system's timestamp granularity
// (coarse clock ticks) could leave its size and times as they were, while any change to an older
// file moves its ctime, which no one can set back.
using FileIdentity = std::tuple<dev_t, ino_t, off_t, std::int64_t, std::int64_t, std::string, std::string>;
std::optional<FileIdentity> identity_of(const DatasetSpec& spec) {
  struct stat st {};
  if (::stat(spec.path.c_str(), &st) != 0) return std::nullopt;
  const std::int64_t ctime_ns = st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (now_ns - ctime_ns < 1'000'000'000LL) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino,     st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                      ctime_ns,  spec.features, spec.labels};
}

// The files whose metadata a first pass has read without crashing, in this process: each is
// probed once, however often it is inspected and loaded.
std::mutex probed_mutex;
std::set<FileIdentity> probed_files;

bool was_probed(const DatasetSpec& spec) {
  const auto id = identity_of(spec);
  const std::lock_guard<std::mutex> lock(probed_mutex);
  return id && probed_files.count(*id) > 0;
}

void record_probed(const DatasetSpec& spec) {
  if (const auto id = identity_of(spec)) {
    const std::lock_guard<std::mutex> lock(probed_mutex);
    probed_files.insert(*id);
  }
}

// Opens every file, each whatever the others did: a clean rejection of one must not leave the
// next unparsed, and so recorded as probed.
void open_each(const std::vector<DatasetSpec>& specs) {
  for (const DatasetSpec& spec : specs) {
    try {
      open_dataset_files(spec);
    } catch (...) {
      // A clean rejection: the caller's own open finds and reports it.
    }
  }
}

// The first pass of opening (metadata only) for `specs` in one separate process.
std::optional<std::string> open_crashes(const std::vector<DatasetSpec>& specs) {
  std::vector<std::string> words;
  for (const DatasetSpec& spec : specs) {
    const auto w = spec_words(spec);
    words.insert(words.end(), w.begin(), w.end());
  }
  std::chrono::milliseconds limit{0};
  for (const DatasetSpec& spec : specs) limit += time_limit_to_read(spec.path);
  return crash_in_child({"dataset-open", words, [&] { open_each(specs); }}, limit);
}

// Stored contiguously in the file itself, a dataset's bytes are read as they are: HDF5 parses
// nothing more than its metadata to read them, so the first pass of opening covers its load too.
// (Bytes in external files are not: reading them opens files the metadata names.)
bool is_contiguous(hid_t dataset, const std::string& where) {
  h5::Handle dcpl(H5_CHECK(H5Dget_create_plist(dataset), where));
  return H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5_CHECK(H5Pget_nfilters(dcpl), where) == 0 &&
         H5_CHECK(H5Pget_external_count(dcpl), where) == 0;
}

}  // namespace

void probe_datasets(const std::vector<DatasetSpec>& specs) {
  if (specs.empty() || open_crashes(specs)) return;  // each is probed alone when used, and the bad one named
  for (const DatasetSpec& spec : specs) record_probed(spec);
}

DatasetLayout inspect_dataset(const DatasetSpec& spec) {
  if (!was_probed(spec)) {
    require_no_crash(spec.path, {"dataset-open", spec_words(spec), [&] { open_dataset_files(spec); }});
    record_probed(spec);
  }
  return open_dataset_files(spec).layout;
}

void require_dataset_memory(const DatasetSpec& spec, const DatasetLayout& layout, const MemoryFacts& memory) {
  const std::string why =
      fmt::format("{} of [{}]", layout.uint8_features ? "uint8" : "float32", fmt::join(layout.shape, ", "));
  require_memory(fmt::format("{}:{}", spec.path, spec.features), layout.feature_bytes, why, memory);
}

Dataset load_dataset(const DatasetSpec& spec) { return load_dataset(spec, current_memory_facts()); }

namespace {

Dataset load_opened(const OpenedDataset& o, const DatasetSpec& spec, const MemoryFacts& memory) {
  require_dataset_memory(spec, o.layout, memory);
  Dataset d;
  d.path = spec.path;
  d.count = o.layout.count;
  d.feature_size = o.layout.feature_size;
  d.num_classes = spec.num_classes;
  if (o.layout.uint8_features) {
    resize_in_huge_pages(d.features_u8, d.count * d.feature_size);
    H5_CHECK(H5Dread(o.features, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.features_u8.data()), o.fctx);
  } else {
    resize_in_huge_pages(d.features_f32, d.count * d.feature_size);
    H5_CHECK(H5Dread(o.features, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.features_f32.data()), o.fctx);
    require_finite(d.features_f32, d.feature_size, o.fctx);
  }

  d.labels.resize(d.count);
  H5_CHECK(H5Dread(o.labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.labels.data()), o.lctx);
  for (std::size_t i = 0; i < d.count; ++i) {
    if (d.labels[i] < 0 || d.labels[i] >= spec.num_classes)
      throw h5::Error(fmt::format("{}: label {} of sample {} is outside [0, {}) (data.num_classes)", o.lctx,
                                  d.labels[i], i, spec.num_classes));
  }
  return d;
}

Dataset load_uncontained(const DatasetSpec& spec, const MemoryFacts& memory) {
  return load_opened(open_dataset_files(spec), spec, memory);
}

}  // namespace

// A file whose datasets are chunked or filtered is read whole by the first pass, not only its
// metadata: the chunk index and filters are parsed as the data is read. It allocates and frees
// before this process allocates, so the peak is one copy. Contiguous datasets (`data import`
// writes them so) need only the first pass of opening, which inspect_dataset may have made.
Dataset load_dataset(const DatasetSpec& spec, const MemoryFacts& memory) {
  if (!was_probed(spec)) inspect_dataset(spec);
  OpenedDataset o = open_dataset_files(spec);
  if (is_contiguous(o.features, o.fctx) && is_contiguous(o.labels, o.lctx)) return load_opened(o, spec, memory);
  o = {};
  std::vector<std::string> words = spec_words(spec);
  for (std::uint64_t v : {memory.mem_available, memory.limit_as, memory.limit_data, memory.mapped, memory.data})
    words.push_back(std::to_string(v));
  require_no_crash(spec.path, {"dataset-load", words, [&] { load_uncontained(spec, memory); }});
  return load_uncontained(spec, memory);
}

Normalization normalization_of(const Dataset& d) {
  double sum = 0.0, sum_sq = 0.0;
  const std::size_t n = d.count * d.feature_size;
  if (d.is_uint8()) {
    // Bytes are summed exactly as integers, then scaled as a byte is:
    // x = raw / 255.
    // 32-bit sums over blocks of 65536 bytes cannot overflow (65536 * 255^2 < 2^32).
    std::uint64_t raw = 0, raw_sq = 0;
    const std::uint8_t* bytes = d.features_u8.data();
    for (std::size_t at = 0; at < n; at += 65536) {
      std::uint32_t block = 0, block_sq = 0;
      for (std::size_t k = at; k < std::min(n, at + 65536); ++k) {
        block += bytes[k];
        block_sq += static_cast<std::uint32_t>(bytes[k]) * bytes[k];
      }
      raw += block;
      raw_sq += block_sq;
    }
    sum = static_cast<double>(raw) / 255.0;
    sum_sq = static_cast<double>(raw_sq) / (255.0 * 255.0);
  } else {
    for (const float x : d.features_f32) {
      sum += x;
      sum_sq += static_cast<double>(x) * x;
    }
  }
  const double mean = sum / static_cast<double>(n);
  const double variance = std::max(sum_sq / static_cast<double>(n) - mean * mean, 1e-12);
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(variance))};
}

bool run_dataset_probe(const std::string& reader, const std::vector<std::string>& args) {
  const bool load = reader == "dataset-load";
  if (reader != "dataset-open" && !load) return false;
  if (load ? args.size() != 9u : args.empty() || args.size() % 4 != 0) return false;
  try {
    if (!load) {
      std::vector<DatasetSpec> specs;
      for (std::size_t i = 0; i < args.size(); i += 4)
        specs.push_back({args[i], args[i + 1], args[i + 2], std::stoi(args[i + 3])});
      open_each(specs);
    } else {
      const DatasetSpec spec{args[0], args[1], args[2], std::stoi(args[3])};
      const auto n = [&](std::size_t i) { return static_cast<std::uint64_t>(std::stoull(args[i])); };
      load_uncontained(spec, MemoryFacts{n(4), n(5), n(6), n(7), n(8)});
    }
  } catch (...) {
    // A clean rejection: the caller's own read finds and reports it.
  }
  return true;
}

}  // namespace slurm_train
