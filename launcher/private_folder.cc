#include "launcher/private_folder.h"

#include <stdlib.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

std::string make_private_folder(const std::string& prefix, std::string_view what) {
  std::string folder = prefix + "XXXXXX";
  if (!::mkdtemp(folder.data()))
    throw std::runtime_error(
        fmt::format("cannot create a folder for {}, '{}': {}", what, folder, std::strerror(errno)));
  return folder;
}

}  // namespace slurm_train
