#include "train/io/h5.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>

namespace slurm_train::h5 {

namespace {

// The innermost entry of HDF5's error stack: the most specific reason it gives.
std::string innermost_error() {
  std::string message;
  auto walk = [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
    if (n == 0 && e->desc) {
      // One line: HDF5's own messages may hold newlines (a failed write's starts with a time).
      std::string text = fmt::format("{} (in {})", e->desc, e->func_name);
      std::replace(text.begin(), text.end(), '\n', ' ');
      *static_cast<std::string*>(out) = std::move(text);
    }
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &message);
  H5Eclear2(H5E_DEFAULT);
  return message.empty() ? "no details from HDF5" : message;
}

// HDF5 1.10 closes the files still open from an atexit handler. After a failed flush (a full
// disk, a file size limit) the file's own close has already half torn it down, and that second
// close at exit crashed (SIGSEGV in H5F__close_cb, exit 139, instead of our error's exit code).
// Every file of ours is closed by its Handle, so the handler is switched off: before the
// library initialises, which is why this runs as a static initialiser.
[[maybe_unused]] const bool kNoCloseAtExit = [] { return H5dont_atexit() >= 0; }();

}  // namespace

namespace {
std::atomic<std::thread::id> background_user{};
}  // namespace

BackgroundUse::BackgroundUse() {
  std::thread::id none{};
  if (!background_user.compare_exchange_strong(none, std::this_thread::get_id()))
    throw std::logic_error("two threads use HDF5 in the background at once");
}

BackgroundUse::~BackgroundUse() { background_user.store(std::thread::id{}); }

void check_thread(const std::string& path) {
  const std::thread::id user = background_user.load();
  if (user != std::thread::id{} && user != std::this_thread::get_id())
    throw std::logic_error(
        fmt::format("'{}' opened while a background thread uses HDF5, which is not thread-safe", path));
}

void silence_default_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void fail(const char* call, const char* file, int line, const std::string& context) {
  throw Error(fmt::format("{}: HDF5 call {} failed at {}:{}: {}", context, call, file, line, innermost_error()));
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    Handle old(id_);
    id_ = other.id_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
}

Handle open_file(const FilePath& file, unsigned flags) {
  check_thread(file.shown);
  silence_default_error_printing();
  hid_t id = H5Fopen(file.path.c_str(), flags, H5P_DEFAULT);
  if (id < 0) throw Error(fmt::format("cannot open HDF5 file '{}': {}", file.shown, innermost_error()));
  return Handle(id);
}

Handle create_file(const FilePath& file, std::size_t align_from) {
  check_thread(file.shown);
  silence_default_error_printing();
  Handle access(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), file.shown));
  if (align_from > 0) H5_CHECK(H5Pset_alignment(access, align_from, kFileAlignment), file.shown);
  hid_t id = H5Fcreate(file.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access);
  if (id < 0) throw Error(fmt::format("cannot create HDF5 file '{}': {}", file.shown, innermost_error()));
  return Handle(id);
}

bool has_dataset(hid_t file, const std::string& name) {
  if (name.empty() || name == "/") return false;
  // H5Lexists fails, rather than answering false, when a group on the way is missing: walk it.
  for (std::size_t end = name.find('/', 1);; end = name.find('/', end + 1)) {
    if (H5Lexists(file, name.substr(0, end).c_str(), H5P_DEFAULT) <= 0) return false;
    if (end == std::string::npos) break;
  }
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

Handle open_dataset(hid_t file, const std::string& name, const std::string& path) {
  if (!has_dataset(file, name)) throw Error(fmt::format("HDF5 file '{}' has no dataset '{}'", path, name));
  return Handle(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), path + ":" + name));
}

namespace {

// Chunks of another rank than the dataspace's, or of an empty dimension, only a crafted or
// damaged file has; HDF5 1.10 reads such a dataset in a loop that allocates without end.
void require_consistent_chunks(hid_t dataset, std::size_t rank, const std::string& context) {
  Handle dcpl(H5_CHECK(H5Dget_create_plist(dataset), context));
  if (H5Pget_layout(dcpl) != H5D_CHUNKED) return;
  hsize_t chunk[H5S_MAX_RANK] = {};
  const int chunk_rank = H5_CHECK(H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk), context);
  const bool empty = std::any_of(chunk, chunk + std::min(chunk_rank, H5S_MAX_RANK), [](hsize_t d) { return d == 0; });
  if (static_cast<std::size_t>(chunk_rank) != rank || empty)
    throw Error(fmt::format("{}: its chunks are [{}] for a dataspace of {} dimension(s) (a damaged or crafted file)",
                            context, fmt::join(chunk, chunk + std::min(chunk_rank, H5S_MAX_RANK), ", "), rank));
}

}  // namespace

std::vector<hsize_t> dataset_shape(hid_t dataset, const std::string& context) {
  Handle space(H5_CHECK(H5Dget_space(dataset), context));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space), context);
  std::vector<hsize_t> shape(static_cast<std::size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space, shape.data(), nullptr), context);
  require_consistent_chunks(dataset, shape.size(), context);
  return shape;
}

namespace {

std::string type_name_of(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return fmt::format("{}{}", H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", 8 * H5Tget_size(type));
    case H5T_FLOAT:
      return fmt::format("float{}", 8 * H5Tget_size(type));
    case H5T_STRING:
      return "string";
    default:
      return fmt::format("HDF5 type class {}", static_cast<int>(H5Tget_class(type)));
  }
}

Extent extent_of(hid_t space, hid_t type, const std::string& context) {
  Extent e;
  const H5S_class_t kind = H5Sget_simple_extent_type(space);
  if (kind == H5S_NO_CLASS) fail("H5Sget_simple_extent_type", __FILE__, __LINE__, context);
  e.null = kind == H5S_NULL;
  if (kind == H5S_SIMPLE) {
    const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space), context);
    e.shape.resize(static_cast<std::size_t>(rank));
    H5_CHECK(H5Sget_simple_extent_dims(space, e.shape.data(), nullptr), context);
  }
  e.type_class = H5_CHECK(H5Tget_class(type), context);
  e.type_size = H5Tget_size(type);
  if (e.type_size == 0) fail("H5Tget_size", __FILE__, __LINE__, context);
  e.variable_string = e.type_class == H5T_STRING && H5Tis_variable_str(type) > 0;
  e.type_name = type_name_of(type);
  return e;
}

}  // namespace

std::string Extent::describe() const {
  if (null) return type_name + " with no elements (a null dataspace)";
  if (shape.empty()) return type_name + " scalar";
  return fmt::format("{} [{}]", type_name, fmt::join(shape, ", "));
}

Extent attribute_extent(hid_t attr, const std::string& context) {
  Handle space(H5_CHECK(H5Aget_space(attr), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  return extent_of(space, type, context);
}

Extent dataset_extent(hid_t dataset, const std::string& context) {
  Handle space(H5_CHECK(H5Dget_space(dataset), context));
  Handle type(H5_CHECK(H5Dget_type(dataset), context));
  Extent e = extent_of(space, type, context);
  if (!e.null) require_consistent_chunks(dataset, e.shape.size(), context);
  return e;
}

std::optional<std::size_t> byte_count(const std::vector<hsize_t>& shape, std::size_t element_size) {
  std::size_t bytes = element_size;
  for (hsize_t d : shape) {
    if (d != 0 && bytes > std::numeric_limits<std::size_t>::max() / d) return std::nullopt;
    bytes *= static_cast<std::size_t>(d);
  }
  return bytes;
}

void write_uint8(hid_t file, const std::string& name, const std::vector<hsize_t>& shape, const std::uint8_t* data,
                 const std::string& context) {
  // Contiguous and uncompressed: a run reads a dataset whole, and Fashion-MNIST's training set
  // took 0.7 s to inflate from its 27 MB of deflate chunks here, 20-35 ms to read straight as
  // 47 MB; the reader's first pass then parses only metadata (dataset.h).
  Handle space(H5_CHECK(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), context));
  Handle dataset(H5_CHECK(H5Dcreate2(file, name.c_str(), H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                          context + ":" + name));
  H5_CHECK(H5Dwrite(dataset, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), context + ":" + name);
}

void write_float32(hid_t parent, const std::string& name, const std::vector<hsize_t>& shape, const float* data,
                   const std::string& context) {
  Handle space(H5_CHECK(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), context));
  Handle dataset(
      H5_CHECK(H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               context + ":" + name));
  H5_CHECK(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), context + ":" + name);
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value,
                            const std::string& context) {
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), context));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE), context);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), context);
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR), context));
  Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), context));
  const char* text = value.c_str();
  H5_CHECK(H5Awrite(attr, type, &text), context);
}

void write_double_attribute(hid_t object, const std::string& name, double value, const std::string& context) {
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR), context));
  Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), context));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), context);
}

void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value, const std::string& context) {
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR), context));
  Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), context));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value), context);
}

void write_int64_list_attribute(hid_t object, const std::string& name, const std::vector<std::int64_t>& values,
                                const std::string& context) {
  const hsize_t count = values.size();
  Handle space(H5_CHECK(H5Screate_simple(1, &count, nullptr), context));
  Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), context));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, values.data()), context);
}

void write_string_list_attribute(hid_t object, const std::string& name, const std::vector<std::string>& values,
                                 const std::string& context) {
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), context));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE), context);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), context);
  const hsize_t count = values.size();
  Handle space(H5_CHECK(H5Screate_simple(1, &count, nullptr), context));
  Handle attr(H5_CHECK(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), context));
  std::vector<const char*> texts;
  for (const auto& v : values) texts.push_back(v.c_str());
  H5_CHECK(H5Awrite(attr, type, texts.data()), context);
}

}  // namespace slurm_train::h5
