// IDX files (the MNIST family's format): a big-endian header with a type code and the
// dimensions, then the data. Plain or gzip-compressed (as Debian ships Fashion-MNIST).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train {

struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct IdxArray {
  std::vector<std::uint64_t> dims;  // dims[0] is the number of items
  std::vector<std::uint8_t> data;   // row-major
};

// Parses an IDX array of unsigned bytes (type code 0x08) from its bytes; `name` is used in
// errors. Checks the magic number, the type, the dimensions and that the data is exactly there.
IdxArray parse_idx_ubyte(const std::vector<std::uint8_t>& bytes, const std::string& name);

// Reads a whole file, inflating it when it is gzip-compressed.
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path);

inline IdxArray read_idx_ubyte(const std::string& path) {
  return parse_idx_ubyte(read_maybe_gzip(path), path);
}

}  // namespace slurm_train
