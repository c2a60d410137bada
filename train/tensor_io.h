// Tensors stored contiguously in a file whose container (HDF5) allocated their space and knows
// their offsets: the bytes go straight between memory and the file. Writes bypass the page cache
// (direct I/O) where the file system allows; reads come in 1 MiB pieces with the CRC-32 computed
// on the way, so that each byte crosses memory once. The checkpoint format (checkpoint_file.h)
// uses both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slurm_train {

struct TensorPiece {
  std::string name;  // the dataset, for the caller's messages and checksums
  std::uint64_t offset = 0;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// Writes every piece into `path` (which exists) at its offset, while a helper thread computes
// their CRC-32s (crc32.h), returned in order: the whole aligned 4 KiB blocks of each piece by
// direct I/O (O_DIRECT) through a staging buffer, the partial blocks at its ends through the page
// cache; all through the page cache where the file system refuses direct I/O. The caller fsyncs.
// A testing aid: slow_ms > 0 writes through the page cache 64 KiB at a time with a pause of
// slow_ms after each. Throws std::system_error naming the call ("open",
// "pwrite", "close") with its errno; a full disk is ENOSPC.
std::vector<std::uint32_t> write_tensor_pieces(const std::string& path, const std::vector<TensorPiece>& pieces,
                                               unsigned slow_ms);

// Reads `bytes` at `offset` of `fd` into `into` and returns their CRC-32. Throws
// std::system_error ("pread"), or std::runtime_error when the file ends first.
std::uint32_t pread_with_crc(int fd, std::uint64_t offset, unsigned char* into, std::size_t bytes);

// The CRC-32 of `bytes` at `offset` of `fd`, read through `buffer` (8 MiB, reused by the caller;
// each 4 MiB half checksummed on a helper thread while the other is read): a check of a whole
// file allocates nothing of its size. Throws as pread_with_crc.
std::uint32_t crc_of_range(int fd, std::uint64_t offset, std::size_t bytes, std::vector<unsigned char>& buffer);

// Throws std::system_error(ENOSPC), saying how much is needed and free, when the file system
// that will hold `path` has less than `bytes` free; unknown space passes (the writes will tell).
void require_free_space(const std::string& path, std::size_t bytes);

}  // namespace slurm_train
