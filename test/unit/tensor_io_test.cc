// Tensor bytes between memory and a file: the direct-I/O write puts every piece's bytes at its
// offset, whatever their alignment, and leaves the bytes around them alone; reads, by direct I/O
// or the page cache, give the bytes and the CRC-32 zlib gives; buffers grown in huge pages keep
// their contents.
#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

#include "test/unit/test_support.h"
#include "train/io/host_vector.h"
#include "train/io/huge_pages.h"
#include "train/io/tensor_io.h"

using namespace slurm_train;
using testing::TempDir;
using testing::zlib_crc;

namespace {

std::vector<unsigned char> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<unsigned char>(seed >> 24);
  }
  return v;
}

void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("tensor io: pieces at any offset are written byte for byte, the bytes between them untouched") {
  TempDir dir;
  const std::string path = dir.path + "/pieces.bin";
  // The file as HDF5 leaves it: metadata (here a pattern) around the places of the tensors.
  const std::size_t size = (std::size_t{9} << 20) + 12345;
  const std::vector<unsigned char> before = pattern(size, 1);
  write_file(path, before);
  // Unaligned starts and ends, a piece inside one block, two adjacent pieces, one larger than the
  // staging buffers (4 MiB), one empty, and the last reaching the file's end.
  const std::vector<std::pair<std::uint64_t, std::size_t>> places = {
      {100, 3 * 4096 + 10},
      {3 * 4096 + 110, 5000},
      {40000, 300},
      {65536, (std::size_t{5} << 20) + 7},
      {(std::size_t{6} << 20) + 1, 0},
      {(std::size_t{7} << 20) + 3, size - (std::size_t{7} << 20) - 3}};
  std::vector<std::vector<unsigned char>> data;
  std::vector<TensorPiece> pieces;
  for (std::size_t i = 0; i < places.size(); ++i)
    data.push_back(pattern(places[i].second, 100 + static_cast<std::uint32_t>(i)));
  for (std::size_t i = 0; i < places.size(); ++i)
    pieces.push_back({"piece" + std::to_string(i), places[i].first, data[i].data(), data[i].size()});

  const std::vector<std::uint32_t> crcs = write_tensor_pieces(path, pieces, 0);
  std::vector<unsigned char> expected = before;
  for (std::size_t i = 0; i < places.size(); ++i) {
    std::copy(data[i].begin(), data[i].end(), expected.begin() + static_cast<std::ptrdiff_t>(places[i].first));
    CHECK(crcs[i] == zlib_crc(data[i].data(), data[i].size()));
  }
  CHECK(file_bytes(path) == expected);
}

TEST_CASE("tensor io: the slow testing write gives the same file") {
  TempDir dir;
  const std::string path = dir.path + "/slow.bin";
  const std::vector<unsigned char> before = pattern(300000, 2), data = pattern(200000, 3);
  write_file(path, before);
  write_tensor_pieces(path, {{"piece", 4097, data.data(), data.size()}}, 1);
  std::vector<unsigned char> expected = before;
  std::copy(data.begin(), data.end(), expected.begin() + 4097);
  CHECK(file_bytes(path) == expected);
}

TEST_CASE("tensor io: ranges read into memory or only checksummed, small and large, give zlib's CRC-32") {
  TempDir dir;
  const std::string path = dir.path + "/range.bin";
  const std::vector<unsigned char> bytes = pattern((std::size_t{17} << 20) + 999, 4);
  write_file(path, bytes);
  TensorReader reader(path);
  // Below a megabyte (the page cache) and above (direct I/O, blocks in flight), unaligned at both
  // ends, and to the file's last byte.
  for (const auto& [offset, n] : std::vector<std::pair<std::size_t, std::size_t>>{{13, 5000},
                                                                                  {4096, 4096},
                                                                                  {100, (std::size_t{9} << 20) + 3},
                                                                                  {13, bytes.size() - 13},
                                                                                  {0, std::size_t{1} << 20}}) {
    CAPTURE(offset);
    CAPTURE(n);
    const std::uint32_t expected = zlib_crc(bytes.data() + offset, n);
    CHECK(reader.read(offset, n, nullptr) == expected);
    std::vector<unsigned char> into(n + 2, 0xab);
    CHECK(reader.read(offset, n, into.data() + 1) == expected);
    CHECK(std::equal(into.begin() + 1, into.end() - 1, bytes.begin() + static_cast<std::ptrdiff_t>(offset)));
    CHECK(into.front() == 0xab);  // nothing written outside the range
    CHECK(into.back() == 0xab);
  }
  std::vector<unsigned char> past(std::size_t{2} << 20);
  testing::check_refused<std::runtime_error>([&] { reader.read(bytes.size() - 1000, past.size(), past.data()); },
                                             "the file ends inside its data");
  testing::check_refused<std::runtime_error>([&] { reader.read(bytes.size() - 10, 100, past.data()); },
                                             "the file ends inside its data");
  testing::check_refused<std::system_error>([&] { TensorReader none(dir.path + "/none.bin"); }, "open");
}

TEST_CASE("tensor io: a range read into a buffer aligned as its offset in the file goes straight into it") {
  TempDir dir;
  const std::string path = dir.path + "/straight.bin";
  const std::vector<unsigned char> bytes = pattern((std::size_t{13} << 20) + 777, 5);
  write_file(path, bytes);
  // This test's folder must take direct I/O (ext4, xfs: any local disk) for there to be a
  // straight read at all.
  const int direct = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  REQUIRE_MESSAGE(direct >= 0, "the test folder takes no direct I/O");
  const std::size_t alignment = direct_io_memory_alignment(direct);
  ::close(direct);
  CHECK(alignment >= 1);
  CHECK(alignment <= 4096);

  HugePageBuffer memory(std::size_t{16} << 20);
  REQUIRE(memory.data() != nullptr);
  // A tensor that starts 100 bytes into a block, and one that starts on a block, each 9 MiB and
  // 3 bytes: their whole 4 MiB blocks straight into the buffer, their partial ends staged.
  for (const std::size_t offset : {std::size_t{3 * 4096 + 100}, std::size_t{8192}}) {
    CAPTURE(offset);
    const std::size_t n = (std::size_t{9} << 20) + 3;
    const std::uint32_t expected = zlib_crc(bytes.data() + offset, n);
    for (const bool alike : {true, false}) {
      CAPTURE(alike);
      // Aligned alike: the buffer's address and the offset have the same remainder by 4096.
      unsigned char* into = memory.data() + 4096 + offset % 4096 + (alike ? 0 : 4);
      std::fill(memory.data(), memory.data() + (std::size_t{16} << 20), 0xab);
      TensorReader reader(path);
      CHECK(reader.read(offset, n, into) == expected);
      CHECK(std::equal(into, into + n, bytes.begin() + static_cast<std::ptrdiff_t>(offset)));
      CHECK(into[-1] == 0xab);  // nothing written outside the range
      CHECK(into[n] == 0xab);
      if (alike || alignment > 4) {
        CHECK((reader.bytes_read_straight() > 0) == alike);
        CHECK(reader.bytes_read_straight() <= n);
        if (alike) CHECK(reader.bytes_read_straight() >= n - (std::size_t{8} << 20));
      }
    }
  }
}

TEST_CASE("host buffers: a megabyte or more starts on a 2 MiB boundary; smaller ones as malloc gives them") {
  HostVector<float> big(std::size_t{1} << 18);  // 1 MiB
  CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % (std::size_t{2} << 20) == 0);
  big[0] = 2.5f;
  big.back() = 3.5f;
  big.resize(std::size_t{3} << 20);  // grown: a new aligned block, the contents kept
  CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % (std::size_t{2} << 20) == 0);
  CHECK(big[0] == 2.5f);
  CHECK(big[(std::size_t{1} << 18) - 1] == 3.5f);
  HostVector<float> small(100, 1.5f);
  CHECK(small[99] == 1.5f);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % alignof(float) == 0);
}

TEST_CASE("huge pages: a buffer grown in huge pages keeps its contents and zeroes the new elements") {
  std::vector<float> v = {1.5f, 2.5f};
  resize_in_huge_pages(v, std::size_t{3} << 20);
  REQUIRE(v.size() == std::size_t{3} << 20);
  CHECK(v[0] == 1.5f);
  CHECK(v[1] == 2.5f);
  CHECK(v.back() == 0.0f);
  resize_in_huge_pages(v, 5);  // shrinking keeps the capacity and the first elements
  CHECK(v == std::vector<float>{1.5f, 2.5f, 0, 0, 0});
}
