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
constexpr const char* kChecksumNote =
    "crc32 attribute of each dataset: zlib CRC-32 of its little-endian bytes in C order";
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
    h5::Handle set(
        H5_CHECK(H5Dcreate2(parent, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), where));
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
    h5::Handle set(
        H5_CHECK(H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), where));
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
    return h5::Handle(
        H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_ + ":" + name));
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
void store_checksums(const FilePath& at, const std::vector<Writer::Piece>& pieces,
                     const std::vector<std::uint32_t>& crcs,
                     const std::vector<std::vector<ShardChecksum>>* shards = nullptr) {
  const std::string& path = at.shown;
  try {
    h5::Handle file = h5::open_file(at, H5F_ACC_RDWR);
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

}  // namespace

std::vector<TensorPiece> create_checkpoint_file(const FilePath& at, const CheckpointState& s) {
  const std::string& path = at.shown;
  const std::size_t elements = s.model.parameters();
  const std::size_t arrays = 1 + (s.is_shard ? optimizer_state_names(s.optimizer).size()
                                             : (s.first.empty() ? 0 : 1) + (s.second.empty() ? 0 : 1));
  const std::size_t tensor_bytes = arrays * elements * sizeof(float);
  // HDF5 1.10 can crash at exit after a write of its own failed (a full disk); so the space a
  // checkpoint needs is checked before HDF5 writes anything, and the big writes are ours.
  try {
    require_free_space(at.path, tensor_bytes + tensor_bytes / 100 + (std::size_t{64} << 10));  // + HDF5 metadata
  } catch (const std::system_error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", path, e.what()));
  }
  auto whole = [&](const HostVector<float>& v) { return s.is_shard ? nullptr : v.data(); };
  Writer w(path);
  try {
    h5::Handle file = h5::create_file(at, kDirectIoFrom);
    {
      h5::Handle model = w.group(file, "/model");
      w.tensors(model, s.model.tensors, whole(s.params));
    }
    write_model_recipe(file, s.model, s.recipe, path);
    {
      h5::Handle optimizer = w.group(file, "/optimizer");
      h5::write_string_attribute(optimizer, "kind", s.optimizer, path);
      const auto names = optimizer_state_names(s.optimizer);
      const HostVector<float>* buffers[2] = {&s.first, &s.second};
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

void write_checkpoint_file(const FilePath& file, const CheckpointState& s, unsigned slow_ms) {
  if (s.is_shard) throw std::logic_error("write_checkpoint_file: a shard is written by save_checkpoint_parallel");
  const std::vector<TensorPiece> pieces = create_checkpoint_file(file, s);
  std::vector<std::uint32_t> crcs;
  try {
    crcs = write_tensor_pieces(file.path, pieces, slow_ms);
  } catch (const std::system_error& e) {
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", file.shown, e.what()));
  }
  store_checksums(file, pieces, crcs);
}

void store_shard_checksums(const FilePath& file, const std::vector<TensorPiece>& pieces,
                           std::vector<ShardChecksum> parts) {
  const std::string& path = file.shown;
  std::sort(parts.begin(), parts.end(), [](const ShardChecksum& a, const ShardChecksum& b) {
    return std::tie(a.piece, a.first) < std::tie(b.piece, b.first);
  });
  std::vector<std::vector<ShardChecksum>> by_piece(pieces.size());
  for (const ShardChecksum& c : parts) {
    if (c.piece >= pieces.size())
      throw CheckpointWriteError(
          fmt::format("cannot write the checkpoint '{}': rank {} sent the checksum of tensor {} of {}", path, c.rank,
                      c.piece, pieces.size()));
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
      throw CheckpointWriteError(
          fmt::format("cannot write the checkpoint '{}': the ranks' parts of {} cover {} of its {} "
                      "elements, not each once",
                      path, pieces[i].name, next, pieces[i].bytes / sizeof(float)));
  }
  store_checksums(file, pieces, crcs, &by_piece);
}

}  // namespace slurm_train
