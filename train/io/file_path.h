// A file as a library opens it and as messages name it. A file in a folder held open (a
// TrustedFolder, a durable file's folder) is opened through the folder's descriptor,
// /proc/self/fd/<fd>/<name>, which no later change of the folder's path can redirect; people
// read the folder's path.
#pragma once

#include <string>
#include <utility>

namespace slurm_train {

struct FilePath {
  // An ordinary path, opened and named alike.
  FilePath(std::string p) : path(p), shown(std::move(p)) {}
  FilePath(std::string p, std::string s) : path(std::move(p)), shown(std::move(s)) {}

  std::string path;   // what open(2) or HDF5 is given
  std::string shown;  // what a message names
};

}  // namespace slurm_train
