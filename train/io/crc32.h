// CRC-32 (the zlib / IEEE 802.3 polynomial, as zlib's crc32() and Python's zlib.crc32 compute
// it) at memory speed: carry-less multiplication (PCLMULQDQ) folding 64 bytes a step, after
// Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction"
// (Intel, 2009). zlib's table-driven crc32 runs at about 1.4 GB/s a core here, slower than the
// disk; this one at several times that. CPUs without PCLMULQDQ, and short inputs, use zlib's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slurm_train {

// The CRC-32 of `bytes` continuing from `crc` (0 for a fresh start): crc32(crc, data, bytes)
// in zlib's terms, for any length.
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes);

// Copies `bytes` from `from` to `to` (not overlapping) and returns their CRC-32 continuing from
// `crc`, in one pass over them: a read into memory checks what it copies without reading it twice.
std::uint32_t crc32_copy(std::uint32_t crc, void* to, const void* from, std::size_t bytes);

// The CRC-32 of A followed by B, from A's CRC, B's CRC and B's length (zlib's crc32_combine):
// parts checksummed apart, by different ranks, give the whole's checksum.
std::uint32_t crc32_combine_bytes(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t b_bytes);

// The CRC-32 of the bytes behind `crc` followed by `spans` pieces of `span_bytes` each, from
// their CRCs (`span_crcs`): crc32_combine_bytes over each in turn, at a fraction of its cost.
std::uint32_t crc32_combine_spans(std::uint32_t crc, const std::uint32_t* span_crcs, std::size_t spans,
                                  std::uint64_t span_bytes);

}  // namespace slurm_train
