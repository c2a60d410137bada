#include "train/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <variant>

#include "train/checkpoint/checkpoint_format.h"
#include "train/io/crash_contained.h"
#include "train/io/crc32.h"
#include "train/io/h5.h"
#include "train/io/huge_pages.h"
#include "train/io/tensor_io.h"

namespace slurm_train {

// Datasets are written and checksummed as the bytes in memory, declared little-endian in the
// file: true only on a little-endian host (x86-64, aarch64), which is all we build for.
static_assert(std::endian::native == std::endian::little, "checkpoints assume a little-endian host");

namespace {

constexpr const char* kRngNote =
    "counter-based: dropout masks are a function of (seed, global row, unit) and each epoch's shuffle of "
    "(seed, epoch); no rank holds mutable RNG state, so seed and step are the RNG state of every rank";
constexpr const char* kChecksumNote = "crc32 attribute of each dataset: zlib CRC-32 of its little-endian bytes in C order";
constexpr const char* kShardedChecksumNote =
    "crc32 attribute of each dataset: zlib CRC-32 of its little-endian bytes in C order; the tensors were written in "
    "parts, one per rank: part k begins at element shard_first[k], its bytes have CRC-32 shard_crc32[k], and rank "
    "shard_rank[k] wrote it";

std::uint32_t crc32_of(const void* data, std::size_t bytes) { return crc32_update(0, data, bytes); }

// ---- writing ----

// Builds the file's structure through HDF5; the tensors' bytes are written afterwards by
// write_pieces(), straight from the host buffers into the space HDF5 allocated for them (no copy
// through HDF5, so the write runs at the device's bandwidth).
class Writer {
 public:
  using Piece = TensorPiece;  // each dataset's crc32 attribute is set once its bytes are written

  explicit Writer(const std::string& path) : path_(path) {}

  // A scalar, written through HDF5.
  void scalar(hid_t parent, const std::string& name, hid_t type, const void* data, std::size_t bytes) {
    const std::string where = path_ + ":" + name;
    h5::Handle space(H5_CHECK(H5Screate(H5S_SCALAR), where));
    h5::Handle set(H5_CHECK(H5Dcreate2(parent, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), where));
    H5_CHECK(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where);
    crc_attribute(set, crc32_of(data, bytes), where);
  }
  // A contiguous float32 dataset whose space HDF5 allocates now and never fills; its bytes are
  // recorded for write_pieces().
  void floats(hid_t parent, const std::string& name, const std::vector<hsize_t>& shape, const float* data) {
    const std::string where = path_ + ":" + name;
    std::size_t n = 1;
    for (hsize_t d : shape) n *= d;
    h5::Handle space(H5_CHECK(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), where));
    h5::Handle dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), where));
    H5_CHECK(H5Pset_layout(dcpl, H5D_CONTIGUOUS), where);
    H5_CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), where);
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), where);
    h5::Handle set(H5_CHECK(H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), where));
    // The checksum is computed on a helper thread while the bytes are written (write_pieces) and
    // stored afterwards (store_checksums); 0 until then, which no reader ever sees: the file is
    // still a .tmp.
    crc_attribute(set, 0, where);
    if (n == 0) return;
    const haddr_t offset = H5Dget_offset(set);
    if (offset == HADDR_UNDEF) throw h5::Error(fmt::format("{}: HDF5 allocated no contiguous space", where));
    std::string full(256, '\0');
    full.resize(static_cast<std::size_t>(std::max<ssize_t>(0, H5Iget_name(set, full.data(), full.size()))));
    pieces_.push_back({full, offset, data, n * sizeof(float)});
  }
  // One field of the format's table, little-endian as its C++ type.
  void counter(hid_t file, const CounterField& f, const CheckpointCounters& c) {
    std::visit(
        [&](auto member) {
          const auto v = c.*member;
          using T = std::remove_const_t<decltype(v)>;
          const hid_t type = std::is_same_v<T, double> ? H5T_IEEE_F64LE
                             : std::is_signed_v<T>     ? H5T_STD_I64LE
                                                       : H5T_STD_U64LE;
          scalar(file, f.path(), type, &v, sizeof v);
        },
        f.member);
  }
  const std::vector<Piece>& pieces() const { return pieces_; }

  // One float32 dataset per parameter tensor, named as the model names them.
  // `buffer` null: a shard's structure, whose bytes its ranks write (checkpoint_parallel.h).
  void tensors(hid_t group, const std::vector<ParamTensor>& tensors, const float* buffer) {
    for (const ParamTensor& t : tensors)
      floats(group, t.name, std::vector<hsize_t>(t.shape.begin(), t.shape.end()), buffer ? buffer + t.offset : nullptr);
  }

  h5::Handle group(hid_t parent, const std::string& name) {
    return h5::Handle(H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_ + ":" + name));
  }
  void int_attribute(hid_t object, const std::string& name, std::int64_t v) {
    h5::Handle space(H5_CHECK(H5Screate(H5S_SCALAR), path_));
    h5::Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), path_));
    H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &v), path_);
  }

 private:
  void crc_attribute(hid_t set, std::uint32_t crc, const std::string& where) {
    h5::Handle space(H5_CHECK(H5Screate(H5S_SCALAR), where));
    h5::Handle attr(H5_CHECK(H5Acreate2(set, "crc32", H5T_STD_U32LE, space, H5P_DEFAULT, H5P_DEFAULT), where));
    H5_CHECK(H5Awrite(attr, H5T_STD_U32LE, &crc), where);
  }

  const std::string& path_;
  std::vector<Piece> pieces_;
};

template <typename T>
void array_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type, const std::vector<T>& values,
                     const std::string& where) {
  const hsize_t n = values.size();
  h5::Handle space(H5_CHECK(H5Screate_simple(1, &n, nullptr), where));
  h5::Handle attr(H5_CHECK(H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), where));
  H5_CHECK(H5Awrite(attr, memory_type, values.data()), where);
}

// Sets each tensor's crc32 attribute (a fixed-size value rewritten in place) and, where a tensor
// was written in parts, its parts' attributes.
void store_checksums(const std::string& path, const std::vector<Writer::Piece>& pieces,
                     const std::vector<std::uint32_t>& crcs, const std::vector<std::vector<ShardChecksum>>* shards = nullptr) {
  try {
    h5::Handle file = h5::open_file(path, H5F_ACC_RDWR);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const std::string where = path + ":" + pieces[i].name;
      h5::Handle set(H5_CHECK(H5Dopen2(file, pieces[i].name.c_str(), H5P_DEFAULT), where));
      h5::Handle attr(H5_CHECK(H5Aopen(set, "crc32", H5P_DEFAULT), where));
      H5_CHECK(H5Awrite(attr, H5T_NATIVE_UINT32, &crcs[i]), where);
      if (!shards) continue;
      std::vector<std::uint64_t> first;
      std::vector<std::uint32_t> crc;
      std::vector<std::int64_t> rank;
      for (const ShardChecksum& c : (*shards)[i]) {
        first.push_back(c.first);
        crc.push_back(c.crc);
        rank.push_back(c.rank);
      }
      array_attribute(set, "shard_first", H5T_STD_U64LE, H5T_NATIVE_UINT64, first, where);
      array_attribute(set, "shard_crc32", H5T_STD_U32LE, H5T_NATIVE_UINT32, crc, where);
      array_attribute(set, "shard_rank", H5T_STD_I64LE, H5T_NATIVE_INT64, rank, where);
    }
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), path);
    H5_CHECK(H5Fclose(file.release()), path);
  } catch (const h5::Error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", path, e.what()));
  }
}

// ---- reading ----

bool is_dataset(hid_t file, const std::string& name) { return h5::has_dataset(file, name); }

// An attribute that must hold one value of `type_class` (a string: variable-length), opened
// after checking its dataspace and type, so that the read into one element cannot overflow.
h5::Handle open_scalar_attribute(hid_t object, const char* name, H5T_class_t type_class, const char* expected,
                                 const std::string& where) {
  if (H5Aexists(object, name) <= 0) throw CheckpointError(fmt::format("{}: attribute '{}' is missing", where, name));
  h5::Handle attr(H5_CHECK(H5Aopen(object, name, H5P_DEFAULT), where));
  const h5::Extent e = h5::attribute_extent(attr, where);
  const bool type_ok = e.type_class == type_class && (type_class != H5T_STRING || e.variable_string) &&
                       (type_class == H5T_STRING || e.type_size <= 8);
  if (!e.is_scalar() || !type_ok)
    throw CheckpointError(
        fmt::format("{}: attribute '{}' holds {}; expected one {} (a scalar)", where, name, e.describe(), expected));
  return attr;
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& where) {
  h5::Handle attr = open_scalar_attribute(object, name, H5T_STRING, "variable-length string", where);
  h5::Handle type(H5_CHECK(H5Aget_type(attr), where));
  char* text = nullptr;
  H5_CHECK(H5Aread(attr, type, &text), where);
  std::string value = text ? text : "";
  h5::Handle space(H5_CHECK(H5Aget_space(attr), where));
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, &text);
  return value;
}

std::int64_t read_int_attribute(hid_t object, const char* name, const std::string& where) {
  h5::Handle attr = open_scalar_attribute(object, name, H5T_INTEGER, "integer", where);
  std::int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v), where);
  return v;
}

double read_double_attribute(hid_t object, const char* name, const std::string& where) {
  h5::Handle attr = open_scalar_attribute(object, name, H5T_FLOAT, "float64", where);
  double v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, &v), where);
  return v;
}

std::uint32_t read_crc_attribute(hid_t set, const std::string& where) {
  if (H5Aexists(set, "crc32") <= 0) throw CheckpointError(fmt::format("{}: no crc32 attribute", where));
  h5::Handle attr = open_scalar_attribute(set, "crc32", H5T_INTEGER, "uint32", where);
  std::uint32_t stored = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_UINT32, &stored), where);
  return stored;
}

// A dataset's shape is believed only as far as the file holds its bytes, and checked before
// anything is allocated for them: without filters HDF5 stores every byte (it would invent the
// unwritten ones from the fill value, which is how a 100 KB file claims gigabytes); compressed,
// a byte stored holds at most 1032 (deflate's highest ratio).
void require_stored(hid_t set, const h5::Extent& e, std::size_t element_size, const std::string& where) {
  const auto bytes = h5::byte_count(e.shape, element_size);
  if (!bytes)
    throw CheckpointError(fmt::format("{}: its shape {} of {}-byte elements overflows the address space", where,
                                      e.describe(), element_size));
  h5::Handle dcpl(H5_CHECK(H5Dget_create_plist(set), where));
  const int filters = H5_CHECK(H5Pget_nfilters(dcpl), where);
  const hsize_t stored = H5Dget_storage_size(set);
  const long double most = filters == 0 ? stored : 1032.0L * stored;
  if (static_cast<long double>(*bytes) > most)
    throw CheckpointError(fmt::format("{}: its shape {} needs {} bytes but the file stores {}{} for it", where,
                                      e.describe(), *bytes, stored, filters == 0 ? "" : " compressed bytes"));
}

// A 1-D attribute of `n` elements of an integer type, read as T; its extent checked first.
template <typename T>
std::vector<T> read_array_attribute(hid_t object, const char* name, std::size_t n, hid_t memory_type,
                                    const std::string& where) {
  if (H5Aexists(object, name) <= 0) throw CheckpointError(fmt::format("{}: attribute '{}' is missing", where, name));
  h5::Handle attr(H5_CHECK(H5Aopen(object, name, H5P_DEFAULT), where));
  const h5::Extent e = h5::attribute_extent(attr, where);
  if (e.null || e.shape != std::vector<hsize_t>{n} || e.type_class != H5T_INTEGER || e.type_size > 8)
    throw CheckpointError(fmt::format("{}: attribute '{}' holds {}; expected {} integers", where, name, e.describe(), n));
  std::vector<T> values(n);
  H5_CHECK(H5Aread(attr, memory_type, values.data()), where);
  return values;
}

// The parts a dataset was written in (shard_first, shard_crc32, shard_rank), each with its
// element count; empty for a dataset written whole. The parts must tile the dataset.
std::vector<ShardChecksum> read_parts(hid_t set, std::size_t elements, const std::string& where) {
  if (H5Aexists(set, "shard_first") <= 0) return {};
  h5::Handle attr(H5_CHECK(H5Aopen(set, "shard_first", H5P_DEFAULT), where));
  const h5::Extent e = h5::attribute_extent(attr, where);
  if (e.null || e.shape.size() != 1 || e.shape[0] == 0 || e.shape[0] > std::max<std::size_t>(elements, 1))
    throw CheckpointError(fmt::format("{}: attribute 'shard_first' holds {}; expected 1 to {} integers", where,
                                      e.describe(), std::max<std::size_t>(elements, 1)));
  const std::size_t k = e.shape[0];
  const auto first = read_array_attribute<std::uint64_t>(set, "shard_first", k, H5T_NATIVE_UINT64, where);
  const auto crc = read_array_attribute<std::uint32_t>(set, "shard_crc32", k, H5T_NATIVE_UINT32, where);
  const auto rank = read_array_attribute<std::int64_t>(set, "shard_rank", k, H5T_NATIVE_INT64, where);
  std::vector<ShardChecksum> parts(k);
  for (std::size_t i = 0; i < k; ++i) {
    const std::uint64_t end = i + 1 < k ? first[i + 1] : elements;
    if (first[i] >= end || (i == 0 && first[i] != 0) || end > elements)
      throw CheckpointError(fmt::format("{}: attribute 'shard_first' is [{}]; expected increasing element numbers "
                                        "from 0, below {}",
                                        where, fmt::join(first, ", "), elements));
    parts[i] = {0, first[i], end - first[i], rank[i], crc[i]};
  }
  return parts;
}

// What a read does with the bytes of a contiguous dataset (ours: the tensors). The first pass,
// in a child process (crash_contained.h), probes: it runs everything libhdf5 parses but leaves
// those bytes, which are the file's plain bytes at an offset (read by pread, or by libhdf5
// without parsing anything more), so that the child copies no data and touches no memory of
// this process's. The second pass reads them.
enum class Pass { kProbe, kRead };

bool probe_skips(Pass pass, hid_t set) { return pass == Pass::kProbe && H5Dget_offset(set) != HADDR_UNDEF; }

// A dataset's bytes as stored (read with its own file type) after checking them against its
// crc32 attribute.
struct RawDataset {
  h5::Extent extent;
  std::vector<unsigned char> bytes;
};

// The checks of a dataset's bytes: each part's CRC-32 against its shard_crc32 (a bad part names
// the rank that wrote it), then the whole's against crc32. `part_crcs` are the parts' CRC-32s in
// order (one per part; none for a dataset written whole), `actual` the whole's.
void require_checksums(hid_t set, const std::vector<ShardChecksum>& parts, const std::vector<std::uint32_t>& part_crcs,
                       std::uint32_t actual, const std::string& where) {
  std::vector<std::string> bad;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const ShardChecksum& p = parts[k];
    if (part_crcs[k] != p.crc)
      bad.push_back(fmt::format("part {} of {} (elements {} to {}, written by rank {}) fails its checksum (shard_crc32 "
                                "stored {:08x}, data {:08x})",
                                k + 1, parts.size(), p.first, p.first + p.count - 1, p.rank, p.crc, part_crcs[k]));
  }
  if (!bad.empty()) throw CheckpointError(fmt::format("{}: {}", where, fmt::join(bad, "; ")));
  const std::uint32_t stored = read_crc_attribute(set, where);
  if (stored != actual)
    throw CheckpointError(fmt::format("{}: checksum mismatch (crc32 stored {:08x}, data {:08x})", where, stored, actual));
}

// A dataset opened for its bytes to be checked, after its type, dataspace and stored size were:
// its parts and its whole size in bytes.
struct CheckedDataset {
  h5::Handle set;
  h5::Extent extent;
  std::vector<ShardChecksum> parts;
  std::size_t bytes = 0;
};

CheckedDataset open_numbers(hid_t file, const std::string& name, const std::string& where) {
  CheckedDataset d;
  d.set = h5::Handle(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), where));
  d.extent = h5::dataset_extent(d.set, where);
  const h5::Extent& e = d.extent;
  if ((e.type_class != H5T_INTEGER && e.type_class != H5T_FLOAT) || e.null)
    throw CheckpointError(fmt::format("{}: holds {}; expected numbers", where, e.describe()));
  require_stored(d.set, e, e.type_size, where);
  d.parts = read_parts(d.set, *h5::byte_count(e.shape, 1), where);
  d.bytes = *h5::byte_count(e.shape, e.type_size);
  return d;
}

RawDataset read_verified(hid_t file, const std::string& name, const std::string& path, Pass pass = Pass::kRead) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  try {
    CheckedDataset d = open_numbers(file, name, where);
    RawDataset raw{d.extent, {}};
    if (probe_skips(pass, d.set)) {
      read_crc_attribute(d.set, where);
      return raw;
    }
    h5::Handle type(H5_CHECK(H5Dget_type(d.set), where));
    raw.bytes.resize(d.bytes);
    if (!raw.bytes.empty()) H5_CHECK(H5Dread(d.set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.bytes.data()), where);
    std::vector<std::uint32_t> part_crcs;
    for (const ShardChecksum& p : d.parts)
      part_crcs.push_back(crc32_of(raw.bytes.data() + p.first * d.extent.type_size, p.count * d.extent.type_size));
    require_checksums(d.set, d.parts, part_crcs, crc32_of(raw.bytes.data(), raw.bytes.size()), where);
    return raw;
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

// Checks a dataset's checksums. A contiguous one (ours: every tensor) is read straight from the
// file by `reader`, part by part, and nothing of its size is allocated; others through HDF5.
void verify_dataset(hid_t file, TensorReader* reader, const std::string& name, const std::string& path, Pass pass) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  try {
    CheckedDataset d = open_numbers(file, name, where);
    const haddr_t offset = H5Dget_offset(d.set);
    if (pass == Pass::kProbe || offset == HADDR_UNDEF || !reader) {
      read_verified(file, name, path, pass);
      return;
    }
    std::vector<std::uint32_t> part_crcs;
    std::uint32_t actual = 0;
    try {
      if (d.parts.empty()) actual = reader->read(offset, d.bytes, nullptr);
      for (const ShardChecksum& p : d.parts) {
        const std::size_t bytes = p.count * d.extent.type_size;
        part_crcs.push_back(reader->read(offset + p.first * d.extent.type_size, bytes, nullptr));
        actual = crc32_combine_bytes(actual, part_crcs.back(), bytes);
      }
    } catch (const std::exception& e) {
      throw CheckpointError(fmt::format("{}: {}", where, e.what()));
    }
    require_checksums(d.set, d.parts, part_crcs, actual, where);
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

template <typename T>
T read_scalar(hid_t file, const std::string& name, const std::string& path) {
  const RawDataset raw = read_verified(file, name, path);
  const h5::Extent& e = raw.extent;
  const bool is_float = std::is_floating_point_v<T>;
  if (!e.is_scalar() || e.type_size != sizeof(T) || (e.type_class == H5T_FLOAT) != is_float)
    throw CheckpointError(fmt::format("{}: dataset {}: holds {}; expected one {}{} (a scalar)", path, name, e.describe(),
                                      is_float ? "float" : (std::is_signed_v<T> ? "int" : "uint"), 8 * sizeof(T)));
  T v;
  std::memcpy(&v, raw.bytes.data(), sizeof v);
  return v;
}

// A float32 tensor of the expected shape, read into `into` and checked against its crc32.
// Contiguous datasets (ours) are read straight from the file (`reader`); others through HDF5. A
// probe (into may be null) reads only what libhdf5 parses.
void read_tensor(hid_t file, TensorReader* reader, const std::string& name, const std::vector<hsize_t>& shape, float* into,
                 const std::string& path, Pass pass) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  try {
    if (!h5::has_dataset(file, name)) throw CheckpointError(where + " is missing");
    h5::Handle set(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), where));
    h5::Handle type(H5_CHECK(H5Dget_type(set), where));
    const h5::Extent found = h5::dataset_extent(set, where);
    if (found.null || found.shape != shape || H5Tequal(type, H5T_IEEE_F32LE) <= 0)
      throw CheckpointError(fmt::format("{}: holds {}; expected float32 [{}]", where, found.describe(), fmt::join(shape, ", ")));
    require_stored(set, found, sizeof(float), where);
    const std::uint32_t stored = read_crc_attribute(set, where);
    const std::size_t bytes = *h5::byte_count(shape, sizeof(float));
    if (probe_skips(pass, set)) return;
    std::vector<float> probed;  // a probe of a dataset libhdf5 decodes reads it, into its own buffer
    if (pass == Pass::kProbe) {
      probed.resize(bytes / sizeof(float));
      into = probed.data();
    }
    const haddr_t offset = H5Dget_offset(set);
    std::uint32_t actual;
    if (offset != HADDR_UNDEF && reader) {
      try {
        actual = reader->read(offset, bytes, reinterpret_cast<unsigned char*>(into));
      } catch (const std::exception& e) {
        throw CheckpointError(fmt::format("{}: {}", where, e.what()));
      }
    } else {
      if (bytes > 0) H5_CHECK(H5Dread(set, H5T_IEEE_F32LE, H5S_ALL, H5S_ALL, H5P_DEFAULT, into), where);
      actual = crc32_of(into, bytes);
    }
    if (stored != actual)
      throw CheckpointError(fmt::format("{}: checksum mismatch (crc32 stored {:08x}, data {:08x})", where, stored, actual));
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

h5::Handle open_checkpoint(const std::string& path) {
  try {
    return h5::open_file(path, H5F_ACC_RDONLY);
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

// Every dataset's path in the file, in HDF5's visiting order.
std::vector<std::string> dataset_names(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* out) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(std::string("/") + name);
    return 0;
  };
  H5_CHECK(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit, &names, H5O_INFO_BASIC), path);
  return names;
}

// One layer's layout from its weight dataset [out, in], placed at `offset`; both dimensions at
// least 1 (a bias [out] is then never larger than its weight), within an int, and stored.
LayerLayout layer_layout_of(hid_t file, const std::string& name, std::size_t offset, const std::string& path) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  h5::Handle set(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), where));
  const h5::Extent e = h5::dataset_extent(set, where);
  constexpr hsize_t kMost = std::numeric_limits<int>::max();
  if (e.null || e.shape.size() != 2 || e.shape[0] == 0 || e.shape[1] == 0 || e.shape[0] > kMost || e.shape[1] > kMost)
    throw CheckpointError(fmt::format("{}: holds {}; expected float32 [out, in], each from 1 to {}", where, e.describe(), kMost));
  require_stored(set, e, sizeof(float), where);
  LayerLayout L;
  L.out = static_cast<int>(e.shape[0]);
  L.in = static_cast<int>(e.shape[1]);
  L.weight = offset;
  L.bias = offset + e.shape[0] * e.shape[1];
  return L;
}

// The /model attributes and /preprocessing (model_file.h). Files written before they existed
// have neither: the defaults stay (the engine's activation and no preprocessing), which a
// resume does not use. Present, they are checked against the layers.
ModelRecipe read_model_recipe(hid_t file, const std::vector<LayerLayout>& layers, const std::string& path) {
  ModelRecipe r;
  if (H5Lexists(file, "/preprocessing", H5P_DEFAULT) <= 0) return r;
  const std::string model_where = path + ": /model";
  h5::Handle model(H5_CHECK(H5Gopen2(file, "/model", H5P_DEFAULT), model_where));
  r.activation = read_string_attribute(model, "activation", model_where);
  if (r.activation != "relu" && r.activation != "gelu" && r.activation != "identity")
    throw CheckpointError(fmt::format("{}: attribute 'activation' is '{}'; expected relu, gelu or identity", model_where,
                                      r.activation));
  std::vector<std::int64_t> expected{layers.front().in};
  for (const LayerLayout& L : layers) expected.push_back(L.out);
  if (H5Aexists(model, "widths") <= 0) throw CheckpointError(model_where + ": attribute 'widths' is missing");
  h5::Handle attr(H5_CHECK(H5Aopen(model, "widths", H5P_DEFAULT), model_where));
  const h5::Extent e = h5::attribute_extent(attr, model_where);
  const std::vector<hsize_t> shape{expected.size()};
  if (e.null || e.shape != shape || e.type_class != H5T_INTEGER || e.type_size > 8)
    throw CheckpointError(fmt::format("{}: attribute 'widths' holds {}; expected int64 [{}] ({})", model_where,
                                      e.describe(), expected.size(), fmt::join(expected, ", ")));
  std::vector<std::int64_t> widths(expected.size());
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, widths.data()), model_where);
  if (widths != expected)
    throw CheckpointError(fmt::format("{}: attribute 'widths' is [{}] but the layers' shapes give [{}]", model_where,
                                      fmt::join(widths, ", "), fmt::join(expected, ", ")));
  const std::string pre_where = path + ": /preprocessing";
  h5::Handle pre(H5_CHECK(H5Gopen2(file, "/preprocessing", H5P_DEFAULT), pre_where));
  r.input_scale = read_double_attribute(pre, "input_scale", pre_where);
  r.mean = read_double_attribute(pre, "mean", pre_where);
  r.inv_stddev = read_double_attribute(pre, "inv_stddev", pre_where);
  return r;
}

// The model a file holds: a GPT from its /model attributes (kind "gpt" and GPT-2's names for its
// shape), else an MLP from its own /model shapes (layer1, layer2, ... until one is missing).
ModelLayout read_model_layout(hid_t file, const std::string& path) {
  const std::string where = path + ": /model";
  if (H5Lexists(file, "/model", H5P_DEFAULT) <= 0) throw CheckpointError(where + " is missing");
  h5::Handle model(H5_CHECK(H5Gopen2(file, "/model", H5P_DEFAULT), where));
  const std::string kind = H5Aexists(model, "kind") > 0 ? read_string_attribute(model, "kind", where) : "mlp";
  if (kind == "gpt") {
    GptConfig g;
    const auto size = [&](const char* name) {
      const std::int64_t v = read_int_attribute(model, name, where);
      if (v < 1 || v > (1 << 24))
        throw CheckpointError(fmt::format("{}: attribute '{}' is {}; expected 1 to {}", where, name, v, 1 << 24));
      return static_cast<int>(v);
    };
    g.vocab = size("vocab_size");
    g.block = size("n_positions");
    g.layers = size("n_layer");
    g.heads = size("n_head");
    g.embd = size("n_embd");
    try {
      return gpt_model_layout(g);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(fmt::format("{}: {}", where, e.what()));
    }
  }
  if (kind != "mlp") throw CheckpointError(fmt::format("{}: attribute 'kind' is '{}'; expected mlp or gpt", where, kind));
  std::vector<LayerLayout> layers;
  std::size_t offset = 0;
  for (std::size_t l = 0;; ++l) {
    const std::string w = "/model/" + Mlp<float>::parameter_name(l, true);
    if (!is_dataset(file, w)) break;
    layers.push_back(layer_layout_of(file, w, offset, path));
    offset = layers.back().end();
  }
  if (layers.empty()) throw CheckpointError(fmt::format("{}: /model/layer1.weight is missing", path));
  return mlp_model_layout(layers);
}

}  // namespace

std::vector<TensorPiece> create_checkpoint_file(const std::string& path, const CheckpointState& s) {
  const std::size_t elements = s.model.parameters();
  const std::size_t arrays = 1 + (s.is_shard ? optimizer_state_names(s.optimizer).size() : (s.first.empty() ? 0 : 1) + (s.second.empty() ? 0 : 1));
  const std::size_t tensor_bytes = arrays * elements * sizeof(float);
  // HDF5 1.10 can crash at exit after a write of its own failed (a full disk); so the space a
  // checkpoint needs is checked before HDF5 writes anything, and the big writes are ours.
  try {
    require_free_space(path, tensor_bytes + tensor_bytes / 100 + (std::size_t{64} << 10));  // + HDF5 metadata
  } catch (const std::system_error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", path, e.what()));
  }
  auto whole = [&](const std::vector<float>& v) { return s.is_shard ? nullptr : v.data(); };
  Writer w(path);
  try {
    h5::Handle file = h5::create_file(path);
    {
      h5::Handle model = w.group(file, "/model");
      w.tensors(model, s.model.tensors, whole(s.params));
    }
    write_model_recipe(file, s.model, s.recipe, path);
    {
      h5::Handle optimizer = w.group(file, "/optimizer");
      h5::write_string_attribute(optimizer, "kind", s.optimizer, path);
      const auto names = optimizer_state_names(s.optimizer);
      const std::vector<float>* buffers[2] = {&s.first, &s.second};
      for (std::size_t i = 0; i < names.size(); ++i) {
        h5::Handle state = w.group(optimizer, names[i]);
        w.tensors(state, s.model.tensors, whole(*buffers[i]));
      }
    }
    {
      h5::Handle train = w.group(file, "/train");
      h5::write_string_attribute(train, "rng", kRngNote, path);
    }
    for (const CounterField& f : counter_fields()) w.counter(file, f, s.counters);
    {
      h5::Handle meta = w.group(file, "/meta");
      w.int_attribute(meta, "format_version", s.format_version);
      w.int_attribute(meta, "world_size", s.counters.world_size);
      h5::write_string_attribute(meta, "program_version", s.program_version, path);
      h5::write_string_attribute(meta, "created", s.created, path);
      h5::write_string_attribute(meta, "host", s.host, path);
      h5::write_string_attribute(meta, "device", s.device, path);
      h5::write_string_attribute(meta, "checksum", s.is_shard ? kShardedChecksumNote : kChecksumNote, path);
      h5::write_string_attribute(meta, "config", s.config_toml, path);
    }
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), path);
    H5_CHECK(H5Fclose(file.release()), path);  // the close writes too: its failure counts
  } catch (const h5::Error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", path, e.what()));
  }
  return w.pieces();
}

void write_checkpoint_file(const std::string& path, const CheckpointState& s, unsigned slow_ms) {
  if (s.is_shard) throw std::logic_error("write_checkpoint_file: a shard is written by save_checkpoint_parallel");
  const std::vector<TensorPiece> pieces = create_checkpoint_file(path, s);
  std::vector<std::uint32_t> crcs;
  try {
    crcs = write_tensor_pieces(path, pieces, slow_ms);
  } catch (const std::system_error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", path, e.what()));
  }
  store_checksums(path, pieces, crcs);
}

void store_shard_checksums(const std::string& path, const std::vector<TensorPiece>& pieces,
                           std::vector<ShardChecksum> parts) {
  std::sort(parts.begin(), parts.end(),
            [](const ShardChecksum& a, const ShardChecksum& b) { return std::tie(a.piece, a.first) < std::tie(b.piece, b.first); });
  std::vector<std::vector<ShardChecksum>> by_piece(pieces.size());
  for (const ShardChecksum& c : parts) {
    if (c.piece >= pieces.size())
      throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': rank {} sent the checksum of tensor {} of {}",
                                             path, c.rank, c.piece, pieces.size()));
    by_piece[c.piece].push_back(c);
  }
  std::vector<std::uint32_t> crcs(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    // The parts must tile the dataset, or a rank wrote a place nobody checks.
    std::uint64_t next = 0;
    for (const ShardChecksum& c : by_piece[i]) {
      if (c.first != next) break;
      crcs[i] = crc32_combine_bytes(crcs[i], c.crc, c.count * sizeof(float));
      next += c.count;
    }
    if (next * sizeof(float) != pieces[i].bytes)
      throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': the ranks' parts of {} cover {} of its {} "
                                             "elements, not each once",
                                             path, pieces[i].name, next, pieces[i].bytes / sizeof(float)));
  }
  store_checksums(path, pieces, crcs, &by_piece);
}

namespace {

// What the tensors' bytes are read with (see read_tensor): none in a probe, which reads only what
// libhdf5 parses, nor where the file cannot be opened again (HDF5 then reads them).
std::unique_ptr<TensorReader> tensor_reader(const std::string& path, Pass pass) {
  if (pass == Pass::kProbe) return nullptr;
  try {
    return std::make_unique<TensorReader>(path);
  } catch (const std::system_error&) {
    return nullptr;
  }
}

void read_uncontained(const std::string& path, CheckpointState& s, const ModelLayout* expected,
                      Pass pass) {
  h5::Handle file = open_checkpoint(path);
  const std::unique_ptr<TensorReader> reader = tensor_reader(path, pass);
  s.model = {};
  s.path = path;
  try {
    const std::string meta_where = path + ": /meta";
    if (H5Lexists(file, "/meta", H5P_DEFAULT) <= 0) throw CheckpointError(meta_where + " is missing");
    h5::Handle meta(H5_CHECK(H5Gopen2(file, "/meta", H5P_DEFAULT), meta_where));
    s.format_version = read_int_attribute(meta, "format_version", meta_where);
    if (s.format_version != kCheckpointFormatVersion)
      throw CheckpointError(fmt::format("{}: format_version {} is not the {} this program reads", meta_where,
                                        s.format_version, kCheckpointFormatVersion));
    s.program_version = read_string_attribute(meta, "program_version", meta_where);
    s.created = read_string_attribute(meta, "created", meta_where);
    s.host = read_string_attribute(meta, "host", meta_where);
    s.device = H5Aexists(meta, "device") > 0 ? read_string_attribute(meta, "device", meta_where) : "";
    s.config_toml = read_string_attribute(meta, "config", meta_where);

    s.model = read_model_layout(file, path);
    // Before any buffer is sized from the file: a checkpoint of another model is refused here.
    if (expected) {
      const std::string mismatch = model_layout_mismatch(s.model, *expected);
      if (!mismatch.empty()) throw CheckpointMismatch(fmt::format("cannot resume from {}: {}", path, mismatch));
    }
    if (s.model.kind == "mlp") s.recipe = read_model_recipe(file, s.model.layers, path);
    auto read_tensors = [&](const std::string& group, std::vector<float>& into) {
      const bool reading = pass == Pass::kRead;
      if (reading) resize_in_huge_pages(into, s.model.parameters());
      for (const ParamTensor& t : s.model.tensors)
        read_tensor(file, reader.get(), group + "/" + t.name, std::vector<hsize_t>(t.shape.begin(), t.shape.end()),
                    reading ? &into[t.offset] : nullptr, path, pass);
    };
    read_tensors("/model", s.params);

    const std::string opt_where = path + ": /optimizer";
    if (H5Lexists(file, "/optimizer", H5P_DEFAULT) <= 0) throw CheckpointError(opt_where + " is missing");
    h5::Handle optimizer(H5_CHECK(H5Gopen2(file, "/optimizer", H5P_DEFAULT), opt_where));
    s.optimizer = read_string_attribute(optimizer, "kind", opt_where);
    if (s.optimizer != "adamw" && s.optimizer != "sgd")
      throw CheckpointError(fmt::format("{}: unknown optimizer kind '{}'", opt_where, s.optimizer));
    const auto names = optimizer_state_names(s.optimizer);
    std::vector<float>* buffers[2] = {&s.first, &s.second};
    for (std::size_t i = 0; i < names.size(); ++i) read_tensors("/optimizer/" + names[i], *buffers[i]);
    if (names.size() < 2) s.second.clear();  // SGD has one state: none left from an earlier read

    for (const CounterField& f : counter_fields())
      std::visit([&](auto member) { s.counters.*member = read_scalar<std::remove_reference_t<decltype(s.counters.*member)>>(
                                        file, f.path(), path); },
                 f.member);
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

std::vector<std::string> verify_uncontained(const std::string& path, Pass pass) {
  std::vector<std::string> problems;
  try {
    h5::Handle file = open_checkpoint(path);
    const std::unique_ptr<TensorReader> reader = tensor_reader(path, pass);
    for (const std::string& name : dataset_names(file, path)) {
      try {
        verify_dataset(file, reader.get(), name, path, pass);
      } catch (const std::exception& e) {
        problems.push_back(e.what());
      }
    }
  } catch (const std::exception& e) {
    problems.push_back(e.what());
    return problems;
  }
  if (problems.empty()) {
    try {
      CheckpointState s;
      // The structure: every dataset a resume needs is there; their bytes were checked above.
      read_uncontained(path, s, nullptr, Pass::kProbe);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

std::string describe_uncontained(const std::string& path, Pass pass) {
  CheckpointState s;
  read_uncontained(path, s, nullptr, pass);
  const CheckpointCounters& c = s.counters;
  std::string out = fmt::format("{}\n/meta\n  format_version   {}\n  program_version  {}\n  created          {}\n"
                                "  host             {}\n  device           {}\n  world_size       {}\n",
                                path, s.format_version, s.program_version, s.created, s.host,
                                s.device.empty() ? "(not recorded)" : s.device, c.world_size);
  // Four fields to a line.
  auto lines = [](const std::vector<std::string>& fields) {
    std::string text;
    for (std::size_t i = 0; i < fields.size(); ++i)
      text += "  " + fields[i] + (i % 4 == 3 || i + 1 == fields.size() ? "\n" : "");
    return text;
  };
  out += "/train\n" + lines(describe_counters("/train", c));
  std::vector<std::string> optimizer = {"kind " + s.optimizer};
  for (std::string& f : describe_counters("/optimizer", c)) optimizer.push_back(std::move(f));
  out += "/optimizer\n" + lines(optimizer);
  if (s.model.kind == "gpt") {
    const GptConfig& g = s.model.gpt;
    out += fmt::format("/model\n  kind gpt  vocab_size {}  n_positions {}  n_layer {}  n_head {}  n_embd {}\n", g.vocab,
                       g.block, g.layers, g.heads, g.embd);
  } else {
    const ModelRecipe& r = s.recipe;
    out += fmt::format("/preprocessing\n  x = (raw * {:.9g} - {:.9g}) * {:.9g}  activation {}\n", r.input_scale, r.mean,
                       r.inv_stddev, r.activation);
  }
  out += "tensors\n";
  h5::Handle file = open_checkpoint(path);
  for (const std::string& name : dataset_names(file, path)) {
    h5::Handle set(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), path + ":" + name));
    const h5::Extent e = h5::dataset_extent(set, path + ":" + name);
    out += fmt::format("  {:<44} {:<8} [{}]\n", name, e.type_name, fmt::join(e.shape, ", "));
  }
  out += "config\n" + s.config_toml;
  return out;
}

void probe_uncontained(const std::string& path, CheckpointUse use) {
  switch (use) {
    case CheckpointUse::kRead: {
      CheckpointState probe;
      read_uncontained(path, probe, nullptr, Pass::kProbe);
      break;
    }
    case CheckpointUse::kVerify: verify_uncontained(path, Pass::kProbe); break;
    case CheckpointUse::kDescribe: describe_uncontained(path, Pass::kProbe); break;
  }
}

const char* reader_name(CheckpointUse use) {
  switch (use) {
    case CheckpointUse::kRead: return "checkpoint-read";
    case CheckpointUse::kVerify: return "checkpoint-verify";
    case CheckpointUse::kDescribe: return "checkpoint-describe";
  }
  return "";
}

// Refuses a file that crashes or hangs its reader in a child process (crash_contained.h).
void require_no_crash(const std::string& path, CheckpointUse use) {
  const ContainedRead read{reader_name(use), {path}, [&] { probe_uncontained(path, use); }};
  if (const auto crash = crash_in_child(read, time_limit_to_read(path)))
    throw CheckpointError(fmt::format("{}: reading it {} (a separate process reads it first: libhdf5 crashes or "
                                      "loops forever on some damaged files); the file is damaged or not a checkpoint",
                                      path, *crash));
}

}  // namespace

void read_checkpoint_file(const std::string& path, CheckpointState& s, const ModelLayout* expected) {
  require_no_crash(path, CheckpointUse::kRead);
  read_uncontained(path, s, expected, Pass::kRead);
}

CheckpointState read_checkpoint_file(const std::string& path) {
  CheckpointState s;
  read_checkpoint_file(path, s, nullptr);
  return s;
}

std::vector<std::string> verify_checkpoint_file(const std::string& path) {
  try {
    require_no_crash(path, CheckpointUse::kVerify);
  } catch (const CheckpointError& e) {
    return {e.what()};
  }
  return verify_uncontained(path, Pass::kRead);
}

std::string describe_checkpoint_file(const std::string& path) {
  require_no_crash(path, CheckpointUse::kDescribe);
  return describe_uncontained(path, Pass::kRead);
}

bool run_checkpoint_probe(const std::string& reader, const std::string& path) {
  for (CheckpointUse use : {CheckpointUse::kRead, CheckpointUse::kVerify, CheckpointUse::kDescribe}) {
    if (reader != reader_name(use)) continue;
    try {
      probe_uncontained(path, use);
    } catch (...) {
      // A clean rejection: the caller's own read finds and reports it.
    }
    return true;
  }
  return false;
}

}  // namespace slurm_train
