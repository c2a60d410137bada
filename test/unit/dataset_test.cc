#include "train/data/dataset.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "test/unit/test_support.h"
#include "train/data/idx.h"
#include "train/io/h5.h"

using namespace slurm_train;

namespace {

std::string temp_path(const char* suffix) {
  char path[] = "/tmp/slurm-train-dataset-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(path);
  return std::string(path) + suffix;
}

// A float dataset [rows, cols] with the given features and labels 0, 1, 0, ...
std::string write_float_dataset(std::size_t rows, std::size_t cols, std::vector<float> features) {
  const std::string path = temp_path(".h5");
  h5::Handle file = h5::create_file(path);
  h5::write_float32(file, "/images", {rows, cols}, features.data(), path);
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>(i % 2);
  h5::write_uint8(file, "/labels", {rows}, labels.data(), path);
  return path;
}

std::string write_gzip(const std::vector<std::uint8_t>& head, std::size_t zeros) {
  const std::string path = temp_path(".gz");
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f);
  REQUIRE(gzwrite(f, head.data(), static_cast<unsigned>(head.size())) == static_cast<int>(head.size()));
  const std::vector<std::uint8_t> block(1 << 20);
  for (std::size_t left = zeros; left > 0;) {
    const std::size_t n = std::min(left, block.size());
    REQUIRE(gzwrite(f, block.data(), static_cast<unsigned>(n)) == static_cast<int>(n));
    left -= n;
  }
  REQUIRE(gzclose(f) == Z_OK);
  return path;
}

}  // namespace

TEST_CASE("dataset: a non-finite feature is refused at load, naming the file, dataset and first bad sample") {
  std::vector<float> features(4 * 3, 0.5f);
  features[2 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
  features[3 * 3 + 0] = std::numeric_limits<float>::infinity();
  const std::string path = write_float_dataset(4, 3, features);
  testing::check_refused<h5::Error>(
      [&] {
        load_dataset({path, "/images", "/labels", 2});
      },
      path + ":/images: feature 1 of sample 2 is nan (expected finite numbers");
  features[2 * 3 + 1] = 0;
  const std::string inf = write_float_dataset(4, 3, features);
  testing::check_refused<h5::Error>(
      [&] {
        load_dataset({inf, "/images", "/labels", 2});
      },
      inf + ":/images: feature 0 of sample 3 is inf");
  features[3 * 3 + 0] = 0;
  const std::string good = write_float_dataset(4, 3, features);
  CHECK(load_dataset({good, "/images", "/labels", 2}).count == 4);
  for (const auto& p : {path, inf, good}) std::remove(p.c_str());
}

TEST_CASE("dataset: the features' size is checked against memory before they are read") {
  const std::string path = write_float_dataset(64, 16, std::vector<float>(64 * 16, 1.0f));
  const DatasetLayout layout = inspect_dataset({path, "/images", "/labels", 2});
  CHECK(layout.count == 64);
  CHECK(layout.feature_size == 16);
  CHECK(layout.feature_bytes == 64u * 16 * 4);
  MemoryFacts tight;
  tight.mem_available = 1000;
  testing::check_refused<MemoryError>(
      [&] {
        load_dataset({path, "/images", "/labels", 2}, tight);
      },
      path + ":/images needs 4.0 KiB (float32 of [64, 16]), but only 1000 bytes");
  std::remove(path.c_str());
}

TEST_CASE("idx: the header is checked before the data is inflated") {
  std::uint8_t magic[4] = {0, 0, 0x08, 3};
  CHECK(parse_idx_rank(magic, "f") == 3);
  magic[2] = 0x0d;
  testing::check_refused<IdxError>([&] { parse_idx_rank(magic, "f"); }, "element type code 0x0d is not unsigned byte");
  const std::uint8_t huge[12] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2};
  testing::check_refused<IdxError>([&] { parse_idx_dims(huge, 3, "f"); }, "promise more than 2^64 bytes");

  // 16 header bytes promising 2 x 2 x 2, then 64 MiB of zeros: refused after 8 bytes of data.
  const std::string bomb = write_gzip({0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2}, 64 << 20);
  testing::check_refused<IdxError>([&] { read_idx_ubyte(bomb, MemoryFacts{}); },
                                   "holds more data than the 8 bytes its header promises");
  // A header promising 4 TiB is refused before anything is allocated.
  const std::string big = write_gzip({0, 0, 8, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 4, 0}, 10);
  MemoryFacts facts;
  facts.mem_available = 1ull << 30;
  testing::check_refused<IdxError>([&] { read_idx_ubyte(big, facts); },
                                   "IDX file '" + big +
                                       "' needs 4.0 TiB (its header promises [65536, 65536, 1024] "
                                       "unsigned bytes), but only 1.0 GiB");
  const std::string exact = write_gzip({0, 0, 8, 1, 0, 0, 0, 3}, 3);
  CHECK(read_idx_ubyte(exact, facts).data.size() == 3);
  for (const auto& p : {bomb, big, exact}) std::remove(p.c_str());
}

TEST_CASE("dataset: chunks of another rank than the dataspace are refused before HDF5 reads them") {
  // Found by the dataset fuzzer: HDF5 1.10 read this file's /images ([N] with [12, 28, 28] chunks)
  // in a loop that allocated gigabytes.
  const std::string path = "test/fixtures/hdf5/chunks-of-another-rank.h5";
  REQUIRE_MESSAGE(std::filesystem::exists(path), path << " not found: run from the repository root");
  DatasetSpec spec;
  spec.path = path;
  testing::check_refused<h5::Error>([&] { load_dataset(spec); },
                                    path + ":/images: its chunks are [12, 28, 28] for a dataspace of 1 dimension(s)");
}

TEST_CASE("dataset: files probed together still each get their own verdict, the bad one named") {
  const std::string good = write_float_dataset(4, 3, std::vector<float>(12, 0.25f));
  const std::string bad = temp_path(".h5");
  { std::ofstream(bad) << "not an HDF5 file"; }
  // The bad one first: its rejection in the first pass must not leave the good one unparsed.
  probe_datasets({{bad, "/images", "/labels", 2}, {good, "/images", "/labels", 2}});
  CHECK(inspect_dataset({good, "/images", "/labels", 2}).count == 4);
  testing::check_refused<std::exception>([&] { inspect_dataset({bad, "/images", "/labels", 2}); }, bad);
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("dataset: normalisation of bytes is their mean and deviation as x = raw / 255") {
  Dataset d;
  d.count = 2;
  d.feature_size = 2;
  d.features_u8 = {0, 255, 255, 255};  // x: 0, 1, 1, 1 -> mean 0.75, variance 0.1875
  const Normalization n = normalization_of(d);
  CHECK(n.mean == doctest::Approx(0.75f));
  CHECK(n.inv_stddev == doctest::Approx(1.0 / std::sqrt(0.1875)));
}
