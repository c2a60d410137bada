// `slurm-train data import`: IDX pairs (MNIST, Fashion-MNIST, ...) to the HDF5 layout the engine
// reads: /images uint8 [N, rows, cols] and /labels uint8 [N], chunked and compressed, with
// attributes naming the source and the classes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace slurm_train {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ImportedFile {
  std::string path;
  std::size_t samples = 0;
};

// Writes `out_path` through a temporary file, fsynced and renamed over it (an existing file is
// replaced whole or not at all; a failed import removes the temporary file). Class names may be
// empty: then classes are named by number.
ImportedFile import_idx_pair(const std::string& images_path, const std::string& labels_path,
                             const std::string& out_path, std::vector<std::string> class_names);

// Throws IdxError when `out_path` cannot be an output file: it is a folder, or its folder is
// missing. Checked before anything is read.
void require_importable_output(const std::string& out_path);

// Reads the four Fashion-MNIST IDX files (plain or .gz) from `from_dir`; writes
// out_dir/train.h5 and out_dir/test.h5.
std::vector<ImportedFile> import_fashion_mnist(const std::string& from_dir, const std::string& out_dir);

}  // namespace slurm_train
