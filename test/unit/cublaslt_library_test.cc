// cuBLASLt opened on first use: every function resolves from the toolkit's library, with no GPU
// needed to open it.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "kernels/cuda/cublaslt_library.h"

#include <doctest/doctest.h>

#include <string>

using namespace slurm_train::cuda;

TEST_CASE("cublaslt: the library opens once and every function this program calls resolves") {
  const CublasLt& lt = cublaslt();
  CHECK(&cublaslt() == &lt);
#define SLURM_TRAIN_CUBLASLT_RESOLVED(name) CHECK_MESSAGE((lt.name != nullptr), #name);
  SLURM_TRAIN_CUBLASLT_FUNCTIONS(SLURM_TRAIN_CUBLASLT_RESOLVED)
#undef SLURM_TRAIN_CUBLASLT_RESOLVED
  // A call through the table reaches the library: the name of a status, as CUBLAS_CHECK reports it.
  CHECK(std::string(lt.cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");
  CHECK(std::string(kCublasLtLibrary) == "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
}
#endif
