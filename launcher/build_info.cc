#include "launcher/build_info.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>

#include <fmt/format.h>

#ifndef SLURM_TRAIN_VERSION
#error "SLURM_TRAIN_VERSION must be defined by the build (see the Makefile)"
#endif

namespace slurm_train {

namespace {

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  // Callable before MPI_Init (MPI 3.0): --version must work on a login node with no launcher.
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<std::size_t>(length));
  auto comma = version.find(',');  // Open MPI appends the repository and the date
  return comma == std::string::npos ? version : version.substr(0, comma);
}

std::string hdf5_library() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return fmt::format("{}.{}.{}", major, minor, release);
}

}  // namespace

std::string build_info() {
  return fmt::format(
      "slurm-train {}\n"
      "  compiler: {} {}, C++{}{}\n"
      "  MPI:      {}\n"
      "  HDF5:     {}\n"
      "  OpenBLAS: {}\n"
      "  CUDA:     {}",
      SLURM_TRAIN_VERSION,
#if defined(__clang__)
      "clang",
#else
      "g++",
#endif
      __VERSION__, __cplusplus / 100 % 100,
#ifdef SLURM_TRAIN_SANITIZE
      ", AddressSanitizer + UndefinedBehaviorSanitizer",
#else
      "",
#endif
      mpi_library(), hdf5_library(), openblas_get_config(),
#ifdef SLURM_TRAIN_WITH_CUDA
      "built in"
#else
      "not in this build"
#endif
  );
}

}  // namespace slurm_train
