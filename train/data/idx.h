// IDX files (the MNIST family's format): a big-endian header with a type code and the
// dimensions, then the data. Plain or gzip-compressed (as Debian ships Fashion-MNIST).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/io/memory_budget.h"

namespace slurm_train {

struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct IdxArray {
  std::vector<std::uint64_t> dims;  // dims[0] is the number of items
  std::vector<std::uint8_t> data;   // row-major
};

inline constexpr std::size_t kIdxMaxRank = 4;

struct IdxHeader {
  std::vector<std::uint64_t> dims;
  std::uint64_t data_bytes = 0;  // what the dimensions promise (unsigned bytes)
};

// The number of dimensions out of the first 4 bytes: checks the magic number and that the
// element type is unsigned byte (0x08). `name` is used in errors.
std::size_t parse_idx_rank(const std::uint8_t (&magic)[4], const std::string& name);

// The dimensions out of the 4 * rank bytes after the magic number; refuses a zero dimension and
// a product that overflows.
IdxHeader parse_idx_dims(const std::uint8_t* bytes, std::size_t rank, const std::string& name);

// Reads an IDX array of unsigned bytes, inflating it when it is gzip-compressed. The header is
// read first and its promise checked against `memory` before the data is: a small gzip bomb is
// refused before it is inflated, and data beyond what the header promises is an error.
IdxArray read_idx_ubyte(const std::string& path, const MemoryFacts& memory);

}  // namespace slurm_train
