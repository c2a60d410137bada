#include "train/io/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace slurm_train {

namespace {

std::uint32_t crc32_zlib(std::uint32_t crc, const unsigned char* p, std::size_t bytes) {
  // zlib's crc32 takes a uInt length: feed it in pieces below 4 GiB.
  uLong c = crc;
  while (bytes > 0) {
    const std::size_t n = std::min<std::size_t>(bytes, 1u << 30);
    c = crc32(c, p, static_cast<uInt>(n));
    p += n, bytes -= n;
  }
  return static_cast<std::uint32_t>(c);
}

#if defined(__x86_64__)

bool has_pclmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}

#define ST_PCLMUL __attribute__((target("pclmul,sse4.1")))

ST_PCLMUL inline __m128i load16(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

// Carries the 128 bits of x forward across the distance that k's two constants stand for, onto
// `next`.
ST_PCLMUL inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

// The folding of the paper on bit-reflected data. `crc` is the running register (the CRC's
// complement); bytes >= 64 and a multiple of 16. The constants are x^k mod P(x), bit-reflected
// and shifted, for the distances the folds cover (k1, k2: 4 x 128 bits; k3, k4: 128 bits; k5:
// 64 bits), then P(x) and mu = x^64 / P(x) for the Barrett reduction.
// With `out`, every 16 bytes loaded are also stored there: a copy in the same pass.
ST_PCLMUL std::uint32_t crc32_fold(std::uint32_t crc, const unsigned char* p, std::size_t bytes, unsigned char* out) {
  alignas(16) static const std::uint64_t k1k2[2] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const std::uint64_t k3k4[2] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const std::uint64_t k5k0[2] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const std::uint64_t poly[2] = {0x01db710641, 0x01f7011641};

  const auto take = [&out](const unsigned char* at) {
    const __m128i v = load16(at);
    if (out) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
      out += 16;
    }
    return v;
  };
  __m128i x1 = take(p);
  __m128i x2 = take(p + 16), x3 = take(p + 32), x4 = take(p + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  p += 64, bytes -= 64;
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  for (; bytes >= 64; p += 64, bytes -= 64) {
    x1 = fold(x1, k, take(p));
    x2 = fold(x2, k, take(p + 16));
    x3 = fold(x3, k, take(p + 32));
    x4 = fold(x4, k, take(p + 48));
  }
  // Four lanes into one, then the remaining 16-byte blocks.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold(x1, k, x2);
  x1 = fold(x1, k, x3);
  x1 = fold(x1, k, x4);
  for (; bytes >= 16; p += 16, bytes -= 16) x1 = fold(x1, k, take(p));

  // 128 bits to 64, then Barrett reduction to 32.
  const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i x2r = _mm_clmulepi64_si128(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2r);
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2r = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x00), x2r);
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2r = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x10);
  x2r = _mm_clmulepi64_si128(_mm_and_si128(x2r, mask32), k, 0x00);
  return static_cast<std::uint32_t>(_mm_extract_epi32(_mm_xor_si128(x1, x2r), 1));
}

#endif

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (bytes >= 64 && has_pclmul()) {
    const std::size_t folded = bytes & ~std::size_t{15};
    crc = ~crc32_fold(~crc, p, folded, nullptr);
    p += folded, bytes -= folded;
  }
#endif
  return crc32_zlib(crc, p, bytes);
}

std::uint32_t crc32_copy(std::uint32_t crc, void* to, const void* from, std::size_t bytes) {
  auto* out = static_cast<unsigned char*>(to);
  const auto* p = static_cast<const unsigned char*>(from);
#if defined(__x86_64__)
  if (bytes >= 64 && has_pclmul()) {
    const std::size_t folded = bytes & ~std::size_t{15};
    crc = ~crc32_fold(~crc, p, folded, out);
    p += folded, out += folded, bytes -= folded;
  }
#endif
  std::memcpy(out, p, bytes);
  return crc32_zlib(crc, out, bytes);
}

std::uint32_t crc32_combine_bytes(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t b_bytes) {
  return static_cast<std::uint32_t>(crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(b_bytes)));
}

std::uint32_t crc32_combine_spans(std::uint32_t crc, const std::uint32_t* span_crcs, std::size_t spans,
                                  std::uint64_t span_bytes) {
  if (spans == 0) return crc;
  const uLong op = crc32_combine_gen64(static_cast<z_off64_t>(span_bytes));  // once: each combine is then one product
  for (std::size_t i = 0; i < spans; ++i) crc = static_cast<std::uint32_t>(crc32_combine_op(crc, span_crcs[i], op));
  return crc;
}

}  // namespace slurm_train
