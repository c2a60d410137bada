// Matrix products through cuBLASLt, in the engine's row-major terms, with fused epilogues.
//
// cuBLASLt is column-major. A row-major matrix X[r, c] with leading dimension ld is, byte for
// byte, the column-major matrix X^T[c, r] with the same ld; so the row-major product
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B,
// its B is our A, and its (M, N) are our (n, m). In cuBLASLt's terms a bias vector has one entry
// per row of D (its M): in ours, one per column of C, broadcast over the rows, which is a
// Linear layer's bias. The ReLU bit-mask and GELU-input aux buffers are laid out like D
// (column-major, M by N), that is one row of ours per `aux_ld` elements (bits for the mask).
//
// Epilogues (names as cuBLASLt's):
//   kBias          C = op(A) op(B) + bias[n]
//   kReluAuxBias   C = relu(op(A) op(B) + bias), aux = ReLU bit-mask (1 bit an element)
//   kGeluAuxBias   C = gelu(op(A) op(B) + bias), aux = the pre-activation (C's type). cuBLASLt's
//                  GELU is the tanh approximation (PyTorch fuses it only for approximate='tanh'),
//                  not the exact erf form of our model's GELU: the MLP step fuses relu layers
//                  only, and the CUDA test holds these epilogues to gelu_tanh.
//   kDReluBgrad    C = (op(A) op(B)) * relu'(z) from the forward pass's bit-mask in aux, and
//                  bias[n] = sum over the rows of that C (the bias gradient, C's type)
//   kDGeluBgrad    the same with gelu_tanh'(z), z the forward pass's aux
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/cuda/device_buffer.h"

namespace slurm_train::cuda {

enum class DataType { kF32, kBF16 };
enum class Epilogue { kNone, kBias, kReluAuxBias, kGeluAuxBias, kDReluBgrad, kDGeluBgrad };

// Precision of the products: fp32 (full fp32 multiply-add), tf32 (fp32 storage, TF32 tensor
// cores, fp32 accumulation), bf16 (bf16 inputs, fp32 accumulation).
enum class Precision { kFp32, kTf32, kBf16 };
const char* precision_name(Precision p);

struct MatmulArgs {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;  // C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* c = nullptr;
  int ldc = 0;
  DataType ab_type = DataType::kF32, c_type = DataType::kF32;
  float alpha = 1.0f, beta = 0.0f;
  Epilogue epilogue = Epilogue::kNone;
  void* bias = nullptr;     // [n], C's type: read for kBias/k*AuxBias, written for k*Bgrad
  void* aux = nullptr;      // the mask or pre-activation (see above)
  std::int64_t aux_ld = 0;  // elements (bits for the ReLU mask) between two rows of ours
};

// Leading dimension and bytes of the aux buffer for a [rows, cols] output: the ReLU mask's ld
// must be a multiple of 128 bits and the GELU input's a multiple of 8 elements (cuBLASLt).
std::int64_t relu_mask_ld(int cols);
std::size_t relu_mask_bytes(int rows, int cols);
std::int64_t gelu_aux_ld(int cols);

class LtMatmul {
 public:
  // tf32: fp32 inputs use TF32 tensor cores. deterministic: only algorithms without split-K
  // reductions (cuBLASLt's results are then the same run to run on the same GPU model).
  LtMatmul(bool tf32, bool deterministic, std::size_t workspace_bytes = 32u << 20);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Whether cuBLASLt has a kernel for these arguments (types, layout, alignment, epilogue).
  bool supports(const MatmulArgs& args);
  // Runs the product on `stream`; throws CudaError when cuBLASLt has no kernel for it.
  void run(const MatmulArgs& args, cudaStream_t stream);

 private:
  struct Plan;
  // The plan of these arguments, made once per shape and then reused: the same algorithm every
  // time (deterministic) and no heuristic query per call. Null when unsupported.
  Plan* plan_for(const MatmulArgs& args);

  cublasLtHandle_t handle_ = nullptr;
  bool tf32_, deterministic_;
  DeviceBuffer<std::uint8_t> workspace_;
  // Shape, types, epilogue, beta != 0, aux ld and the alignments of a, b, c, bias and aux.
  using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, int, int, bool, std::int64_t, unsigned,
                         unsigned, unsigned, unsigned, unsigned>;
  std::map<Key, Plan*> plans_;
};

}  // namespace slurm_train::cuda
