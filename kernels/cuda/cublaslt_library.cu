#include "kernels/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"

namespace slurm_train::cuda {

#define SLURM_TRAIN_STRINGIFY_(x) #x
#define SLURM_TRAIN_STRINGIFY(x) SLURM_TRAIN_STRINGIFY_(x)
const char* const kCublasLtLibrary = "libcublasLt.so." SLURM_TRAIN_STRINGIFY(CUBLAS_VER_MAJOR);

namespace {

std::string loader_error() {
  const char* why = dlerror();
  return why ? why : "no reason given";
}

CublasLt open_cublaslt() {
  void* library = dlopen(kCublasLtLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!library)
    throw CudaError(std::string("cannot load cuBLASLt: ") + loader_error() +
                    " (install CUDA's cuBLAS, or add the folder that holds " + kCublasLtLibrary +
                    " to LD_LIBRARY_PATH)");
  CublasLt lt;
  const auto resolve = [library](auto& function, const char* name) {
    dlerror();
    void* symbol = dlsym(library, name);
    if (!symbol) {
      const std::string why = loader_error();
      dlclose(library);
      throw CudaError(
          std::string("cannot load cuBLASLt: ") + kCublasLtLibrary + " has no " + name + ": " + why +
          " (a cuBLAS older than the CUDA " SLURM_TRAIN_STRINGIFY(CUBLAS_VER_MAJOR) "." SLURM_TRAIN_STRINGIFY(
              CUBLAS_VER_MINOR) " headers this program was built with)");
    }
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
  };
#define SLURM_TRAIN_CUBLASLT_RESOLVE(name) resolve(lt.name, #name);
  SLURM_TRAIN_CUBLASLT_FUNCTIONS(SLURM_TRAIN_CUBLASLT_RESOLVE)
#undef SLURM_TRAIN_CUBLASLT_RESOLVE
  return lt;
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt lt = open_cublaslt();
  return lt;
}

}  // namespace slurm_train::cuda
