// cuBLASLt, opened on first use instead of linked. Its static initializers take 0.3-0.4 s and
// about 200 MB at program start (CUDA 13, x86-64): linked, every slurm-train command would pay
// that (exec's supervisor, plot, ckpt verify, --version), though only a GPU step multiplies.
#pragma once

#include <cublasLt.h>

namespace slurm_train::cuda {

// The functions this program calls.
#define SLURM_TRAIN_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)

// Each function with the type its header declares.
struct CublasLt {
#define SLURM_TRAIN_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  SLURM_TRAIN_CUBLASLT_FUNCTIONS(SLURM_TRAIN_CUBLASLT_MEMBER)
#undef SLURM_TRAIN_CUBLASLT_MEMBER
};

// The file it opens: libcublasLt.so.<the major version of the headers built against>.
extern const char* const kCublasLtLibrary;

// The library, opened and resolved on the first call (thread-safe) and kept open. Throws
// CudaError naming the file and the loader's reason when it cannot be; the next call tries again.
const CublasLt& cublaslt();

}  // namespace slurm_train::cuda
