// The CRC-32 of any range of a file, composed from the checksums of its spans, read once front
// to back at the disk's speed. `ckpt verify` reads a checkpoint's bytes so while a separate
// process checks its structure (libhdf5 may crash on a damaged file), and takes each dataset's
// range once that process has finished, without reading the data a second time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/io/tensor_io.h"

namespace slurm_train {

// The span for a file of `file_bytes`: 4 KiB, doubled while the file has more than 2^20 spans
// (at most 4 MiB of checksums kept), at most 4 MiB.
std::size_t span_for_file(std::uint64_t file_bytes);

class SpanChecksums {
 public:
  // Reads the whole file (direct I/O where the file system takes it). Throws as TensorReader.
  explicit SpanChecksums(const std::string& path);

  // The CRC-32 of [offset, offset + bytes): the whole spans' checksums composed, the partial
  // spans at its ends read again. Throws std::runtime_error ("the file ends inside its data") when the
  // range passes the end of the file as it was read, std::system_error ("pread") as TensorReader::read.
  std::uint32_t range(std::uint64_t offset, std::uint64_t bytes);

  std::uint64_t file_bytes() const { return file_bytes_; }
  std::size_t span() const { return span_; }

 private:
  TensorReader reader_;
  std::uint64_t file_bytes_ = 0;
  std::size_t span_ = 0;
  std::vector<std::uint32_t> crcs_;
};

}  // namespace slurm_train
