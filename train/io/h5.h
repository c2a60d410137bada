// Thin HDF5 helpers: an owning handle, a checked-call macro whose error names the call, the
// file and line and HDF5's own innermost message, and small typed read/write functions.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/io/file_path.h"

namespace slurm_train::h5 {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Debian's MPI build of HDF5 is not thread-safe. While a thread holds a BackgroundUse (the
// checkpoint writer's thread, for one write), another thread's open or create of an HDF5 file
// throws std::logic_error naming the file, rather than race it inside the library.
class BackgroundUse {
 public:
  BackgroundUse();
  ~BackgroundUse();
  BackgroundUse(const BackgroundUse&) = delete;
  BackgroundUse& operator=(const BackgroundUse&) = delete;
};
// Throws std::logic_error when another thread holds a BackgroundUse; every open and create of a
// file calls it.
void check_thread(const std::string& path);

// HDF5 prints its whole error stack to stderr by default; we report one message instead.
void silence_default_error_printing();

[[noreturn]] void fail(const char* call, const char* file, int line, const std::string& context);

// Checks an HDF5 call that returns a negative value on failure; `context` (usually a path)
// goes into the message.
#define H5_CHECK(call, context)                                                              \
  ([&] {                                                                                     \
    auto h5_check_result_ = (call);                                                          \
    if (h5_check_result_ < 0) ::slurm_train::h5::fail(#call, __FILE__, __LINE__, (context)); \
    return h5_check_result_;                                                                 \
  }())

// Owns one hid_t and closes it with the right H5*close for its type.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  ~Handle();
  hid_t get() const { return id_; }
  // Gives up ownership, for a close whose failure must be checked (H5Fclose writes).
  hid_t release() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// A file in a held folder is opened through its descriptor (file_path.h); messages name
// `file.shown`.
Handle open_file(const FilePath& file, unsigned flags);
// Truncates. With `align_from` > 0, every object of that many bytes or more (a large tensor's
// data) starts at a multiple of kFileAlignment in the file, so that direct I/O can move it
// straight between the file and a buffer that starts at an aligned address (tensor_io.h).
constexpr std::size_t kFileAlignment = 4096;
Handle create_file(const FilePath& file, std::size_t align_from = 0);
bool has_dataset(hid_t file, const std::string& name);
Handle open_dataset(hid_t file, const std::string& name, const std::string& path);
std::vector<hsize_t> dataset_shape(hid_t dataset, const std::string& context);

// What an attribute or dataset holds, read before any of its data: a read into a buffer of one
// element must first know that the file holds one element of the expected type (a crafted file
// may hold thousands where a scalar belongs).
struct Extent {
  bool null = false;           // H5S_NULL: no elements at all
  std::vector<hsize_t> shape;  // empty: a scalar
  H5T_class_t type_class = H5T_NO_CLASS;
  std::size_t type_size = 0;
  bool variable_string = false;
  std::string type_name;  // "int64", "float32", "string", ...
  bool is_scalar() const { return !null && shape.empty(); }
  std::string describe() const;  // "int64 [4096]", "string scalar"
};
Extent attribute_extent(hid_t attr, const std::string& context);
Extent dataset_extent(hid_t dataset, const std::string& context);

// Elements of `shape` times `element_size`; nullopt when that overflows size_t. Pure.
std::optional<std::size_t> byte_count(const std::vector<hsize_t>& shape, std::size_t element_size);

// Writes a contiguous, uncompressed dataset of unsigned bytes with the given shape.
void write_uint8(hid_t file, const std::string& name, const std::vector<hsize_t>& shape, const std::uint8_t* data,
                 const std::string& context);

// Writes a contiguous float32 dataset.
void write_float32(hid_t parent, const std::string& name, const std::vector<hsize_t>& shape, const float* data,
                   const std::string& context);

void write_string_attribute(hid_t object, const std::string& name, const std::string& value,
                            const std::string& context);
void write_double_attribute(hid_t object, const std::string& name, double value, const std::string& context);
void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value, const std::string& context);
void write_int64_list_attribute(hid_t object, const std::string& name, const std::vector<std::int64_t>& values,
                                const std::string& context);
void write_string_list_attribute(hid_t object, const std::string& name, const std::vector<std::string>& values,
                                 const std::string& context);

}  // namespace slurm_train::h5
