// `data import text`: the split of each source, the unigram entropy, and the file it writes.
#include <doctest/doctest.h>

#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "train/data/text_import.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

namespace fs = std::filesystem;

namespace {

std::int64_t int_attribute(hid_t file, const char* name) {
  std::int64_t value = -1;
  const hid_t a = H5Aopen(file, name, H5P_DEFAULT);
  REQUIRE(a >= 0);
  REQUIRE(H5Aread(a, H5T_NATIVE_INT64, &value) >= 0);
  H5Aclose(a);
  return value;
}

}  // namespace

TEST_CASE("text import: each source's last fraction is validation, at least one byte each way") {
  CHECK(validation_bytes(1000, 0.1) == 100);
  CHECK(validation_bytes(1000, 0) == 0);
  CHECK(validation_bytes(5, 0.01) == 1);  // rounds to 0: one byte still
  CHECK(validation_bytes(5, 0.99) == 4);  // rounds to 5: one byte stays for training
  CHECK(validation_bytes(1, 0.5) == 0);   // a single byte cannot be split
  check_refused<TextImportError>([] { validation_bytes(10, 1.0); },
                                 "--validation-fraction 1: expected a fraction in [0, 1)");
  check_refused<TextImportError>([] { validation_bytes(10, -0.1); }, "expected a fraction in [0, 1)");
  check_refused<TextImportError>([] { validation_bytes(10, std::nan("")); }, "expected a fraction in [0, 1)");
}

TEST_CASE("text import: unigram entropy in bits per byte") {
  std::array<std::uint64_t, 256> counts{};
  CHECK(unigram_entropy_bits(counts) == 0);
  counts['a'] = 10;
  CHECK(unigram_entropy_bits(counts) == 0);
  counts['b'] = 10;
  CHECK(unigram_entropy_bits(counts) == doctest::Approx(1.0));
  counts.fill(3);
  CHECK(unigram_entropy_bits(counts) == doctest::Approx(8.0));
}

TEST_CASE("text import: the tokens are the sources' bytes, training parts first, and the attributes say so") {
  const fs::path dir = fs::temp_directory_path() / ("text-import-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.txt") << "abcdefghij";            // 10 bytes: 9 + 1
  std::ofstream(dir / "b.txt") << "0123456789ABCDEFGHIJ";  // 20 bytes: 18 + 2
  const ImportedText t = import_text({(dir / "a.txt").string(), (dir / "b.txt").string()}, (dir / "out").string(), 0.1);
  CHECK(t.path == (dir / "out" / "tokens.h5").string());
  CHECK(t.train_tokens == 27);
  CHECK(t.validation_tokens == 3);
  const hid_t file = H5Fopen(t.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hid_t ds = H5Dopen2(file, "/tokens", H5P_DEFAULT);
  REQUIRE(ds >= 0);
  std::string tokens(30, '\0');
  REQUIRE(H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data()) >= 0);
  CHECK(tokens ==
        "abcdefghi0123456789ABCDEFGHj"
        "IJ");
  CHECK(int_attribute(file, "train_tokens") == 27);
  CHECK(int_attribute(file, "validation_tokens") == 3);
  CHECK(int_attribute(file, "vocab_size") == 256);
  H5Dclose(ds);
  H5Fclose(file);
  fs::remove_all(dir);
}

TEST_CASE("text import: a missing or empty source is named, and nothing is written") {
  const fs::path dir = fs::temp_directory_path() / ("text-import-bad-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "empty.txt");
  check_refused<TextImportError>([&] { import_text({(dir / "nope.txt").string()}, (dir / "out").string(), 0.1); },
                                 "nope.txt' is not a readable file");
  check_refused<TextImportError>([&] { import_text({(dir / "empty.txt").string()}, (dir / "out").string(), 0.1); },
                                 "empty.txt' is empty");
  check_refused<TextImportError>([&] { import_text({}, (dir / "out").string(), 0.1); }, "no text files to import");
  CHECK_FALSE(fs::exists(dir / "out" / "tokens.h5"));
  check_refused<TextImportError>([&] { fortune_files((dir / "none").string()); },
                                 "is not a folder (install the Debian package fortunes");
  fs::remove_all(dir);
}
