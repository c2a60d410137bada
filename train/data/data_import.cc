#include "train/data/data_import.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "train/data/idx.h"
#include "train/io/durable_file.h"
#include "train/io/h5.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFashionMnistClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// "train-images-idx3-ubyte" or the same with ".gz", whichever exists.
std::string find_idx(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  throw IdxError(
      fmt::format("no '{}' or '{}.gz' in '{}' (install the Debian package "
                  "dataset-fashion-mnist, or give --from DIR)",
                  stem, stem, dir));
}

}  // namespace

void require_importable_output(const std::string& out_path) {
  std::error_code ec;
  if (fs::is_directory(out_path, ec))
    throw IdxError(fmt::format("--out '{}' is a folder (expected the path of the HDF5 file to write)", out_path));
  const fs::path parent = fs::absolute(out_path, ec).parent_path();
  if (!fs::is_directory(parent, ec))
    throw IdxError(fmt::format("--out '{}': its folder '{}' does not exist", out_path, parent.string()));
}

ImportedFile import_idx_pair(const std::string& images_path, const std::string& labels_path,
                             const std::string& out_path, std::vector<std::string> class_names) {
  require_importable_output(out_path);
  const IdxArray images = read_idx_ubyte(images_path, current_memory_facts());
  const IdxArray labels = read_idx_ubyte(labels_path, current_memory_facts());
  if (images.dims.size() < 2)
    throw IdxError(
        fmt::format("IDX file '{}': images need at least 2 dimensions, found {}", images_path, images.dims.size()));
  if (labels.dims.size() != 1)
    throw IdxError(fmt::format("IDX file '{}': labels need 1 dimension, found {}", labels_path, labels.dims.size()));
  if (images.dims[0] != labels.dims[0])
    throw IdxError(fmt::format("'{}' has {} images but '{}' has {} labels", images_path, images.dims[0], labels_path,
                               labels.dims[0]));
  const int max_label = *std::max_element(labels.data.begin(), labels.data.end());
  if (class_names.empty()) {
    for (int c = 0; c <= max_label; ++c) class_names.push_back(std::to_string(c));
  } else if (max_label >= static_cast<int>(class_names.size())) {
    throw IdxError(
        fmt::format("IDX file '{}': label {} is outside the {} classes", labels_path, max_label, class_names.size()));
  }

  // A failed import leaves nothing behind, and never a half-written file at out_path.
  write_file_durably(out_path, [&](const FilePath& temporary) {
    const std::string& tmp = temporary.shown;  // for messages
    h5::Handle file = h5::create_file(temporary);
    std::vector<hsize_t> shape(images.dims.begin(), images.dims.end());
    h5::write_uint8(file, "/images", shape, images.data.data(), tmp);
    h5::write_uint8(file, "/labels", {labels.dims[0]}, labels.data.data(), tmp);
    h5::write_string_attribute(file, "source_images", fs::absolute(images_path).string(), tmp);
    h5::write_string_attribute(file, "source_labels", fs::absolute(labels_path).string(), tmp);
    h5::write_string_list_attribute(file, "class_names", class_names, tmp);
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp);
    H5_CHECK(H5Fclose(file.release()), tmp);  // the close writes too: its failure counts
  });
  return {out_path, images.dims[0]};
}

std::vector<ImportedFile> import_fashion_mnist(const std::string& from_dir, const std::string& out_dir) {
  if (!fs::is_directory(from_dir))
    throw IdxError(
        fmt::format("'{}' is not a folder (install the Debian package dataset-fashion-mnist, or give "
                    "--from DIR)",
                    from_dir));
  const std::string train_images = find_idx(from_dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_idx(from_dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_idx(from_dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_idx(from_dir, "t10k-labels-idx1-ubyte");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IdxError(fmt::format("cannot create the output folder '{}': {}", out_dir, ec.message()));
  return {
      import_idx_pair(train_images, train_labels, (fs::path(out_dir) / "train.h5").string(), kFashionMnistClasses),
      import_idx_pair(test_images, test_labels, (fs::path(out_dir) / "test.h5").string(), kFashionMnistClasses),
  };
}

}  // namespace slurm_train
