#include "train/io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace slurm_train {

namespace {

constexpr std::uint32_t kReflectedPolynomial = 0x82f63b78u;

constexpr std::array<std::uint32_t, 256> byte_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (c & 1 ? kReflectedPolynomial : 0);
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = byte_table();

#if defined(__x86_64__)

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}

// The instruction works on the register (the CRC's complement), as the table loop does.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p,
                                                             std::size_t bytes) {
  std::uint64_t c = ~crc;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned; x86 is little-endian, as the CRC's byte order wants
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; bytes > 0; ++p, --bytes) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

#endif

}  // namespace

std::uint32_t crc32c_update_table(std::uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (; bytes > 0; ++p, --bytes) c = kTable[(c ^ *p) & 0xff] ^ (c >> 8);
  return ~c;
}

std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t bytes) {
#if defined(__x86_64__)
  if (has_sse42()) return crc32c_sse42(crc, static_cast<const unsigned char*>(data), bytes);
#endif
  return crc32c_update_table(crc, data, bytes);
}

}  // namespace slurm_train
