// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the checksum of TFRecord
// framing, which TensorBoard's event files use. Not the CRC-32 of checkpoints (train/io/crc32.h,
// zlib's polynomial): the two differ for every input but the empty one.
//
// SSE4.2's crc32 instruction computes this polynomial, 8 bytes a step, on CPUs that have it
// (checked at run time); a byte-wise table otherwise. Event files are small (a few KiB a
// step), so neither the table's speed nor PCLMULQDQ folding matters here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slurm_train {

// The CRC-32C of `bytes` continuing from `crc` (0 for a fresh start; the CRC of A passed with B
// gives the CRC of A followed by B).
std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t bytes);

inline std::uint32_t crc32c(const void* data, std::size_t bytes) { return crc32c_update(0, data, bytes); }

// The same by the table alone: what a CPU without SSE4.2 computes, and the reference the tests
// compare the instruction's result with.
std::uint32_t crc32c_update_table(std::uint32_t crc, const void* data, std::size_t bytes);

// TFRecord's masked CRC (tensorflow/core/lib/hash/crc32c.h): rotated and offset, because a
// CRC over data that embeds CRCs is weak.
constexpr std::uint32_t masked_crc32c(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace slurm_train
