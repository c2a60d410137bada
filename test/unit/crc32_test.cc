// The CRC-32 of checkpoints (train/io/crc32.h) against zlib's crc32, which it must equal bit for
// bit: every length around the folding's 16- and 64-byte steps, unaligned starts, continued CRCs.
#include "train/io/crc32.h"

#include <zlib.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

TEST_CASE("crc32: equals zlib's crc32 for every length, alignment and starting value") {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes((1 << 16) + 64);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  long mismatches = 0;
  for (std::size_t length = 0; length <= 1100; ++length) {
    for (std::size_t start = 0; start < 3; ++start) {
      const std::uint32_t seed = length % 2 ? static_cast<std::uint32_t>(rng()) : 0;
      const auto want = crc32(seed, bytes.data() + start, static_cast<uInt>(length));
      mismatches += slurm_train::crc32_update(seed, bytes.data() + start, length) != want;
    }
  }
  CHECK(mismatches == 0);
  // A long input in uneven pieces continues to the CRC of the whole.
  const auto whole = crc32(0, bytes.data(), static_cast<uInt>(bytes.size()));
  std::uint32_t crc = 0;
  for (std::size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 1)
    crc = slurm_train::crc32_update(crc, bytes.data() + at, std::min(piece, bytes.size() - at));
  CHECK(crc == whole);
  CHECK(slurm_train::crc32_update(0, "123456789", 9) == 0xcbf43926u);  // the CRC-32 check value
}

TEST_CASE("crc32_copy: copies every byte and returns zlib's crc32 of them, for every length and alignment") {
  std::mt19937 rng(11);
  std::vector<unsigned char> from(4096 + 64), to(4096 + 64);
  for (auto& b : from) b = static_cast<unsigned char>(rng());
  long mismatches = 0, wrong_bytes = 0, touched_outside = 0;
  for (std::size_t length = 0; length <= 1100; length += length < 200 ? 1 : 37) {
    for (std::size_t start = 0; start < 3; ++start) {
      std::fill(to.begin(), to.end(), 0xa5);
      const std::uint32_t seed = length % 2 ? static_cast<std::uint32_t>(rng()) : 0;
      const auto want = crc32(seed, from.data() + start, static_cast<uInt>(length));
      mismatches += slurm_train::crc32_copy(seed, to.data() + 1 + start, from.data() + start, length) != want;
      wrong_bytes += !std::equal(from.begin() + start, from.begin() + start + length, to.begin() + 1 + start);
      touched_outside += to[start] != 0xa5 || to[1 + start + length] != 0xa5;
    }
  }
  CHECK(mismatches == 0);
  CHECK(wrong_bytes == 0);
  CHECK(touched_outside == 0);
}
