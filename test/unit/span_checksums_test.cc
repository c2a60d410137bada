// A file read once front to back in spans: the CRC-32 of any range of it, composed from the
// spans' checksums and its partial ends, is zlib's CRC-32 of those bytes.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <vector>

#include "test/unit/test_support.h"
#include "train/io/crc32.h"
#include "train/io/span_checksums.h"

using namespace slurm_train;
using testing::TempDir;
using testing::zlib_crc;

TEST_CASE("span checksums: any range's CRC-32, composed from the spans, is zlib's") {
  TempDir dir;
  const std::string path = dir.path + "/file.bin";
  std::mt19937_64 random(7);
  // Over a megabyte (direct I/O) and not a whole number of spans or blocks.
  std::vector<unsigned char> bytes((std::size_t{9} << 20) + 4321);
  for (auto& b : bytes) b = static_cast<unsigned char>(random());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  SpanChecksums spans(path);
  CHECK(spans.file_bytes() == bytes.size());
  CHECK(spans.span() == 4096);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges = {{0, bytes.size()},
                                                                 {0, 0},
                                                                 {5, 7},
                                                                 {4096, 4096},
                                                                 {4095, 2},
                                                                 {4000, 9000},
                                                                 {bytes.size() - 1, 1},
                                                                 {bytes.size() - 5000, 5000},
                                                                 {100, (std::size_t{4} << 20) + 17}};
  for (int i = 0; i < 40; ++i) {
    const std::uint64_t offset = random() % bytes.size();
    ranges.emplace_back(offset, random() % (bytes.size() - offset + 1));
  }
  for (const auto& [offset, n] : ranges) {
    CAPTURE(offset);
    CAPTURE(n);
    CHECK(spans.range(offset, n) == zlib_crc(bytes.data() + offset, n));
  }
  testing::check_refused<std::runtime_error>(
      [&] { spans.range(bytes.size() - 10, 11); },
      "the file ends inside its data (bytes 9441495 to 9441506 of a file of 9441505)");
}

TEST_CASE("span checksums: a small file (the page cache), and the span grows with the file") {
  TempDir dir;
  const std::string path = dir.path + "/small.bin";
  std::vector<unsigned char> bytes(10000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  SpanChecksums spans(path);
  CHECK(spans.range(3, 9990) == zlib_crc(bytes.data() + 3, 9990));
  CHECK(spans.range(4096, 5904) == zlib_crc(bytes.data() + 4096, 5904));

  CHECK(span_for_file(0) == 4096);
  CHECK(span_for_file(std::uint64_t{4} << 30) == 4096);                    // 2^20 spans of 4 KiB
  CHECK(span_for_file((std::uint64_t{4} << 30) + 4096) == 8192);           // one span more: they double
  CHECK(span_for_file(std::uint64_t{1} << 50) == (std::size_t{4} << 20));  // at most 4 MiB
  testing::check_refused<std::system_error>([&] { SpanChecksums none(dir.path + "/none.bin"); }, "open");
}

TEST_CASE("crc32: spans of one length combined at once give the sequential combination") {
  std::vector<unsigned char> bytes(5 * 4096 + 100);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 13 + 1);
  std::vector<std::uint32_t> spans;
  for (int s = 0; s < 5; ++s) spans.push_back(crc32_update(0, bytes.data() + 100 + s * 4096, 4096));
  const std::uint32_t head = crc32_update(0, bytes.data(), 100);
  CHECK(crc32_combine_spans(head, spans.data(), spans.size(), 4096) == zlib_crc(bytes.data(), bytes.size()));
  CHECK(crc32_combine_spans(head, spans.data(), 0, 4096) == head);
}
