#include "train/data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace slurm_train {

namespace {

IdxError idx_error(const std::string& name, const std::string& what) {
  return IdxError("IDX file '" + name + "': " + what);
}

// An open gzip (or plain: gzopen reads those transparently) file, closed once.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw IdxError("cannot open '" + path + "': " + std::strerror(errno ? errno : ENOENT));
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() {
    if (file_) gzclose(file_);
  }

  // Up to `size` bytes; fewer only at the end of the data.
  std::size_t read(std::uint8_t* out, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, INT_MAX / 2));
      const int n = gzread(file_, out + done, chunk);
      if (n < 0) {
        int code = 0;
        throw IdxError("cannot read '" + path_ + "': " + gzerror(file_, &code) + " (corrupt or truncated gzip data)");
      }
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

  // A gzip stream cut short reads without error up to the cut; gzclose then says so.
  void close() {
    const int code = gzclose(file_);
    file_ = nullptr;
    if (code != Z_OK) throw IdxError("cannot read '" + path_ + "': the gzip stream is truncated or corrupt");
  }

 private:
  std::string path_;
  gzFile file_;
};

}  // namespace

std::size_t parse_idx_rank(const std::uint8_t (&magic)[4], const std::string& name) {
  if (magic[0] != 0 || magic[1] != 0)
    throw idx_error(name, "not an IDX file (the magic number must start with two zero bytes)");
  if (magic[2] != 0x08)
    throw idx_error(name, fmt::format("element type code 0x{:02x} is not unsigned byte (0x08)", magic[2]));
  const std::size_t rank = magic[3];
  if (rank < 1 || rank > kIdxMaxRank)
    throw idx_error(name, fmt::format("has {} dimensions (expected 1 to {})", rank, kIdxMaxRank));
  return rank;
}

IdxHeader parse_idx_dims(const std::uint8_t* bytes, std::size_t rank, const std::string& name) {
  IdxHeader header;
  for (std::size_t d = 0; d < rank; ++d) {
    const std::uint8_t* p = bytes + 4 * d;
    const std::uint64_t dim =
        (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) | (std::uint64_t{p[2]} << 8) | p[3];
    if (dim == 0) throw idx_error(name, fmt::format("dimension {} is zero", d));
    header.dims.push_back(dim);
  }
  const auto bytes_promised = checked_bytes(header.dims, 1);
  if (!bytes_promised)
    throw idx_error(name, fmt::format("dimensions [{}] promise more than 2^64 bytes", fmt::join(header.dims, ", ")));
  header.data_bytes = *bytes_promised;
  return header;
}

IdxArray read_idx_ubyte(const std::string& path, const MemoryFacts& memory) {
  GzReader in(path);
  std::uint8_t magic[4] = {};
  const std::size_t got = in.read(magic, sizeof magic);
  if (got < sizeof magic) throw idx_error(path, fmt::format("too short for an IDX header ({} bytes)", got));
  const std::size_t rank = parse_idx_rank(magic, path);
  std::uint8_t dims[4 * kIdxMaxRank] = {};
  if (in.read(dims, 4 * rank) < 4 * rank) throw idx_error(path, "header cut short");
  const IdxHeader header = parse_idx_dims(dims, rank, path);
  try {
    require_memory(fmt::format("IDX file '{}'", path), header.data_bytes,
                   fmt::format("its header promises [{}] unsigned bytes", fmt::join(header.dims, ", ")), memory);
  } catch (const MemoryError& e) {
    throw IdxError(e.what());
  }

  IdxArray array{header.dims, std::vector<std::uint8_t>(header.data_bytes)};
  const std::size_t data = in.read(array.data.data(), array.data.size());
  if (data != header.data_bytes)
    throw idx_error(path, fmt::format("holds {} data bytes, but its header promises {} (truncated or corrupt)", data,
                                      header.data_bytes));
  std::uint8_t extra = 0;
  if (in.read(&extra, 1) != 0)
    throw idx_error(path,
                    fmt::format("holds more data than the {} bytes its header promises (corrupt)", header.data_bytes));
  in.close();
  return array;
}

}  // namespace slurm_train
