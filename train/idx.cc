#include "train/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace slurm_train {

IdxArray parse_idx_ubyte(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  auto fail = [&](const std::string& what) -> IdxError {
    return IdxError("IDX file '" + name + "': " + what);
  };
  if (bytes.size() < 4) throw fail("too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes[0] != 0 || bytes[1] != 0)
    throw fail("not an IDX file (the magic number must start with two zero bytes)");
  if (bytes[2] != 0x08)
    throw fail(fmt::format("element type code 0x{:02x} is not unsigned byte (0x08)", bytes[2]));
  const unsigned rank = bytes[3];
  if (rank < 1 || rank > 4) throw fail("has " + std::to_string(rank) + " dimensions (expected 1 to 4)");
  const std::size_t header = 4 + 4 * std::size_t{rank};
  if (bytes.size() < header) throw fail("header cut short");

  IdxArray array;
  std::uint64_t count = 1;
  for (unsigned d = 0; d < rank; ++d) {
    const std::uint8_t* p = &bytes[4 + 4 * d];
    const std::uint64_t dim = (std::uint64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    if (dim == 0) throw fail("dimension " + std::to_string(d) + " is zero");
    if (count > std::numeric_limits<std::uint32_t>::max() / dim * 16)
      throw fail("dimensions are implausibly large");
    count *= dim;
    array.dims.push_back(dim);
  }
  if (bytes.size() - header != count)
    throw fail("holds " + std::to_string(bytes.size() - header) + " data bytes, but its header promises " +
               std::to_string(count) + " (truncated or corrupt)");
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

std::vector<std::uint8_t> read_maybe_gzip(const std::string& path) {
  // gzopen reads plain files transparently.
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw IdxError("cannot open '" + path + "': " + std::strerror(errno ? errno : ENOENT));
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const int n = gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      throw IdxError("cannot read '" + path + "': " + message + " (corrupt or truncated gzip data)");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  // A gzip stream cut short reads without error up to the cut; gzclose then says so.
  if (gzclose(file) != Z_OK)
    throw IdxError("cannot read '" + path + "': the gzip stream is truncated or corrupt");
  return bytes;
}

}  // namespace slurm_train
