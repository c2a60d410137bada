// The CRC-32 of checkpoints (train/io/crc32.h) against zlib's crc32, which it must equal bit for
// bit: every length around the folding's 16- and 64-byte steps, unaligned starts, continued CRCs.
#include "train/io/crc32.h"

#include <zlib.h>

#include <doctest/doctest.h>

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
