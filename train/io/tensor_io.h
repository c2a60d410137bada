// Tensors stored contiguously in a file whose container (HDF5) allocated their space and knows
// their offsets: the bytes go straight between memory and the file, bypassing the page cache
// (direct I/O) where the file system allows, with the CRC-32 computed on the way. The checkpoint
// format (checkpoint_file.h) uses both.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/io/huge_pages.h"

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

// Ranges of this many bytes or more go by direct I/O; files that hold tensors align those of
// this size (h5::create_file), so that their bytes move straight between the file and a buffer
// whose address is aligned alike (host_vector.h aligns large ones), without a staging copy.
constexpr std::size_t kDirectIoFrom = std::size_t{1} << 20;

// Tensors' bytes read out of one file with their CRC-32s. Ranges of a megabyte or more go by
// direct I/O (O_DIRECT: no page cache, whose fresh pages cost more than the disk where memory
// is a VM's, docs/performance.md) in 4 MiB blocks, four in flight, each checksummed by the
// thread that read it: straight into the caller's buffer where its address and the file offset
// are aligned alike (the file system's direct I/O alignment), else through a staging buffer it
// is copied out of; smaller ranges, and every range where the file system refuses direct I/O,
// through the page cache.
class TensorReader {
 public:
  // Throws std::system_error("open") naming nothing: the caller names the file.
  explicit TensorReader(const std::string& path);
  ~TensorReader();
  TensorReader(const TensorReader&) = delete;
  TensorReader& operator=(const TensorReader&) = delete;

  // Reads `bytes` at `offset` into `into` and returns their CRC-32; with `into` null, only
  // checksums them (nothing of their size is allocated). Throws std::system_error ("pread"), or
  // std::runtime_error when the file ends first.
  std::uint32_t read(std::uint64_t offset, std::size_t bytes, unsigned char* into);

  // The CRC-32 of every `span` bytes of the file's first `bytes` (the last span may be shorter),
  // read front to back as `read` reads a range. `span`: a power of two from 4 KiB to 4 MiB.
  std::vector<std::uint32_t> span_checksums(std::uint64_t bytes, std::size_t span);

  // The bytes read so far straight into callers' buffers, without a staging copy.
  std::uint64_t bytes_read_straight() const { return bytes_read_straight_.load(std::memory_order_relaxed); }

 private:
  int for_each_direct_block(
      std::uint64_t offset, std::uint64_t bytes, unsigned char* straight_into,
      const std::function<void(std::size_t, const unsigned char*, std::uint64_t, std::uint64_t)>& use);
  std::uint32_t read_direct(std::uint64_t offset, std::size_t bytes, unsigned char* into);
  std::uint32_t read_buffered(std::uint64_t offset, std::size_t bytes, unsigned char* into);
  int fd_ = -1, direct_ = -1;
  std::size_t memory_alignment_ = 4096;  // what direct I/O asks of a buffer's address here
  std::atomic<std::uint64_t> bytes_read_straight_{0};
  std::unique_ptr<HugePageBuffer> stages_;  // the staging blocks, made at the first direct read
};

// What direct I/O on `fd` asks of a buffer's address (statx's STATX_DIOALIGN: 512 on most disks,
// 4 on some NVMe drives); 4096 where the file system does not say.
std::size_t direct_io_memory_alignment(int fd);

// Throws std::system_error(ENOSPC), saying how much is needed and free, when the file system
// that will hold `path` has less than `bytes` free; unknown space passes (the writes will tell).
void require_free_space(const std::string& path, std::size_t bytes);

}  // namespace slurm_train
