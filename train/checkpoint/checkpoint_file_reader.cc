#include "train/checkpoint/checkpoint_file_reader.h"

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

namespace {

std::uint32_t crc32_of(const void* data, std::size_t bytes) { return crc32_update(0, data, bytes); }

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
    throw CheckpointError(
        fmt::format("{}: attribute '{}' holds {}; expected {} integers", where, name, e.describe(), n));
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
      throw CheckpointError(
          fmt::format("{}: attribute 'shard_first' is [{}]; expected increasing element numbers "
                      "from 0, below {}",
                      where, fmt::join(first, ", "), elements));
    parts[i] = {0, first[i], end - first[i], rank[i], crc[i]};
  }
  return parts;
}

bool probe_skips(CheckpointPass pass, hid_t set) {
  return pass == CheckpointPass::kProbe && H5Dget_offset(set) != HADDR_UNDEF;
}

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
      bad.push_back(
          fmt::format("part {} of {} (elements {} to {}, written by rank {}) fails its checksum (shard_crc32 "
                      "stored {:08x}, data {:08x})",
                      k + 1, parts.size(), p.first, p.first + p.count - 1, p.rank, p.crc, part_crcs[k]));
  }
  if (!bad.empty()) throw CheckpointError(fmt::format("{}: {}", where, fmt::join(bad, "; ")));
  const std::uint32_t stored = read_crc_attribute(set, where);
  if (stored != actual)
    throw CheckpointError(
        fmt::format("{}: checksum mismatch (crc32 stored {:08x}, data {:08x})", where, stored, actual));
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

RawDataset read_verified(hid_t file, const std::string& name, const std::string& path,
                         CheckpointPass pass = CheckpointPass::kRead) {
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
// The CRC-32 of a range of the file: from `spans` where the file was read whole already, else
// read through `reader`.
std::uint32_t range_checksum(TensorReader* reader, SpanChecksums* spans, std::uint64_t offset, std::size_t bytes) {
  return spans ? spans->range(offset, bytes) : reader->read(offset, bytes, nullptr);
}

void verify_dataset(hid_t file, TensorReader* reader, SpanChecksums* spans, const std::string& name,
                    const std::string& path, CheckpointPass pass) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  try {
    CheckedDataset d = open_numbers(file, name, where);
    const haddr_t offset = H5Dget_offset(d.set);
    if (pass == CheckpointPass::kProbe || offset == HADDR_UNDEF || (!reader && !spans)) {
      read_verified(file, name, path, pass);
      return;
    }
    std::vector<std::uint32_t> part_crcs;
    std::uint32_t actual = 0;
    try {
      if (d.parts.empty()) actual = range_checksum(reader, spans, offset, d.bytes);
      for (const ShardChecksum& p : d.parts) {
        const std::size_t bytes = p.count * d.extent.type_size;
        part_crcs.push_back(range_checksum(reader, spans, offset + p.first * d.extent.type_size, bytes));
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
    throw CheckpointError(fmt::format("{}: dataset {}: holds {}; expected one {}{} (a scalar)", path, name,
                                      e.describe(), is_float ? "float" : (std::is_signed_v<T> ? "int" : "uint"),
                                      8 * sizeof(T)));
  T v;
  std::memcpy(&v, raw.bytes.data(), sizeof v);
  return v;
}

// A float32 tensor of the expected shape, read into `into` and checked against its crc32.
// Contiguous datasets (ours) are read straight from the file (`reader`); others through HDF5. A
// probe (into may be null) reads only what libhdf5 parses.
void read_tensor(hid_t file, TensorReader* reader, const std::string& name, const std::vector<hsize_t>& shape,
                 float* into, const std::string& path, CheckpointPass pass, bool crc_required = true) {
  const std::string where = fmt::format("{}: dataset {}", path, name);
  try {
    if (!h5::has_dataset(file, name)) throw CheckpointError(where + " is missing");
    h5::Handle set(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), where));
    h5::Handle type(H5_CHECK(H5Dget_type(set), where));
    const h5::Extent found = h5::dataset_extent(set, where);
    if (found.null || found.shape != shape || H5Tequal(type, H5T_IEEE_F32LE) <= 0)
      throw CheckpointError(
          fmt::format("{}: holds {}; expected float32 [{}]", where, found.describe(), fmt::join(shape, ", ")));
    require_stored(set, found, sizeof(float), where);
    const bool checksummed = crc_required || H5Aexists(set, "crc32") > 0;
    const std::uint32_t stored = checksummed ? read_crc_attribute(set, where) : 0;
    const std::size_t bytes = *h5::byte_count(shape, sizeof(float));
    if (probe_skips(pass, set)) return;
    const haddr_t offset = H5Dget_offset(set);
    // Without a buffer of the caller's (a probe, a check of checksums), the bytes go through one
    // of this read's own only where libhdf5 decodes them; contiguous ones are checksummed as read.
    std::vector<float> own;
    if (!into && !(offset != HADDR_UNDEF && reader)) {
      own.resize(bytes / sizeof(float));
      into = own.data();
    }
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
    if (checksummed && stored != actual)
      throw CheckpointError(
          fmt::format("{}: checksum mismatch (crc32 stored {:08x}, data {:08x})", where, stored, actual));
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
    throw CheckpointError(
        fmt::format("{}: holds {}; expected float32 [out, in], each from 1 to {}", where, e.describe(), kMost));
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
    throw CheckpointError(
        fmt::format("{}: attribute 'activation' is '{}'; expected relu, gelu or identity", model_where, r.activation));
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
  if (kind != "mlp")
    throw CheckpointError(fmt::format("{}: attribute 'kind' is '{}'; expected mlp or gpt", where, kind));
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

// What the tensors' bytes are read with (see read_tensor): none in a probe, which reads only what
// libhdf5 parses, nor where the file cannot be opened again (HDF5 then reads them).
std::unique_ptr<TensorReader> tensor_reader(const std::string& path, CheckpointPass pass) {
  if (pass == CheckpointPass::kProbe) return nullptr;
  try {
    return std::make_unique<TensorReader>(path);
  } catch (const std::system_error&) {
    return nullptr;
  }
}

}  // namespace

void read_checkpoint_uncontained(const std::string& path, CheckpointState& s, const ModelLayout* expected,
                                 CheckpointPass pass, bool optimizer_state) {
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
    auto read_tensors = [&](const std::string& group, HostVector<float>& into, CheckpointPass group_pass) {
      const bool reading = group_pass == CheckpointPass::kRead;
      if (reading) resize_in_huge_pages(into, s.model.parameters());
      for (const ParamTensor& t : s.model.tensors)
        read_tensor(file, reader.get(), group + "/" + t.name, std::vector<hsize_t>(t.shape.begin(), t.shape.end()),
                    reading ? &into[t.offset] : nullptr, path, group_pass);
    };
    read_tensors("/model", s.params, pass);

    const std::string opt_where = path + ": /optimizer";
    if (H5Lexists(file, "/optimizer", H5P_DEFAULT) <= 0) throw CheckpointError(opt_where + " is missing");
    h5::Handle optimizer(H5_CHECK(H5Gopen2(file, "/optimizer", H5P_DEFAULT), opt_where));
    s.optimizer = read_string_attribute(optimizer, "kind", opt_where);
    if (s.optimizer != "adamw" && s.optimizer != "sgd")
      throw CheckpointError(fmt::format("{}: unknown optimizer kind '{}'", opt_where, s.optimizer));
    const auto names = optimizer_state_names(s.optimizer);
    HostVector<float>* buffers[2] = {&s.first, &s.second};
    const CheckpointPass state_pass =
        pass == CheckpointPass::kRead && !optimizer_state ? CheckpointPass::kChecksums : pass;
    for (std::size_t i = 0; i < names.size(); ++i) read_tensors("/optimizer/" + names[i], *buffers[i], state_pass);
    if (state_pass != CheckpointPass::kRead) s.first.clear();
    if (names.size() < 2 || state_pass != CheckpointPass::kRead) s.second.clear();  // none left from an earlier read

    for (const CounterField& f : counter_fields())
      std::visit(
          [&](auto member) {
            s.counters.*member =
                read_scalar<std::remove_reference_t<decltype(s.counters.*member)>>(file, f.path(), path);
          },
          f.member);
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

void read_model_uncontained(const std::string& path, CheckpointState& s, CheckpointPass pass) {
  bool checkpoint = false;
  {
    h5::Handle file = open_checkpoint(path);
    checkpoint = H5Lexists(file, "/optimizer", H5P_DEFAULT) > 0;
  }
  if (checkpoint) return read_checkpoint_uncontained(path, s, nullptr, pass, /*optimizer_state=*/false);
  h5::Handle file = open_checkpoint(path);
  const std::unique_ptr<TensorReader> reader = tensor_reader(path, pass);
  s = CheckpointState{};
  s.path = path;
  s.format_version = 0;
  try {
    if (H5Lexists(file, "/meta", H5P_DEFAULT) > 0) {
      const std::string meta_where = path + ": /meta";
      h5::Handle meta(H5_CHECK(H5Gopen2(file, "/meta", H5P_DEFAULT), meta_where));
      if (H5Aexists(meta, "program_version") > 0)
        s.program_version = read_string_attribute(meta, "program_version", meta_where);
      if (H5Aexists(meta, "config") > 0) s.config_toml = read_string_attribute(meta, "config", meta_where);
    }
    s.model = read_model_layout(file, path);
    if (s.model.kind == "mlp") s.recipe = read_model_recipe(file, s.model.layers, path);
    const bool reading = pass == CheckpointPass::kRead;
    if (reading) resize_in_huge_pages(s.params, s.model.parameters());
    // Model files from before they carried checksums have none: their bytes are read unchecked.
    for (const ParamTensor& t : s.model.tensors)
      read_tensor(file, reader.get(), "/model/" + t.name, std::vector<hsize_t>(t.shape.begin(), t.shape.end()),
                  reading ? &s.params[t.offset] : nullptr, path, pass, /*crc_required=*/false);
  } catch (const h5::Error& e) {
    throw CheckpointError(e.what());
  }
}

std::vector<std::string> verify_checkpoint_uncontained(const std::string& path, CheckpointPass pass,
                                                       SpanChecksums* spans) {
  std::vector<std::string> problems;
  try {
    h5::Handle file = open_checkpoint(path);
    const std::unique_ptr<TensorReader> reader = spans ? nullptr : tensor_reader(path, pass);
    for (const std::string& name : dataset_names(file, path)) {
      try {
        verify_dataset(file, reader.get(), pass == CheckpointPass::kProbe ? nullptr : spans, name, path, pass);
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
      read_checkpoint_uncontained(path, s, nullptr, CheckpointPass::kProbe);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

std::string describe_checkpoint_uncontained(const std::string& path, CheckpointPass pass) {
  CheckpointState s;
  // The text names the tensors, it holds none of their values: their bytes are checked, not kept.
  read_checkpoint_uncontained(path, s, nullptr, pass == CheckpointPass::kRead ? CheckpointPass::kChecksums : pass);
  const CheckpointCounters& c = s.counters;
  std::string out = fmt::format(
      "{}\n/meta\n  format_version   {}\n  program_version  {}\n  created          {}\n"
      "  host             {}\n  device           {}\n  world_size       {}\n",
      path, s.format_version, s.program_version, s.created, s.host, s.device.empty() ? "(not recorded)" : s.device,
      c.world_size);
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

}  // namespace slurm_train
