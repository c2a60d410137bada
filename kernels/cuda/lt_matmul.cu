// cuBLASLt products in row-major terms (see lt_matmul.h for the mapping).
#include "kernels/cuda/lt_matmul.h"

#include "kernels/cuda/cublaslt_library.h"

namespace slurm_train::cuda {
namespace {

cudaDataType_t cuda_type(DataType t) { return t == DataType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kReluAuxBias:
      return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case Epilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDReluBgrad:
      return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case Epilogue::kDGeluBgrad:
      return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

bool uses_aux(Epilogue e) { return e != Epilogue::kNone && e != Epilogue::kBias; }

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic otherwise
// assumes 256-byte alignment and may pick a kernel that faults on our offset parameters.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 1;
  while (a < 256 && address % (2 * a) == 0) a *= 2;
  return a;
}

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  const CublasLt& lt = cublaslt();
  CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value));
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    default:
      return "fp32";
  }
}

std::int64_t relu_mask_ld(int cols) { return (static_cast<std::int64_t>(cols) + 127) / 128 * 128; }
std::size_t relu_mask_bytes(int rows, int cols) {
  return static_cast<std::size_t>(relu_mask_ld(cols)) / 8 * static_cast<std::size_t>(rows);
}
std::int64_t gelu_aux_ld(int cols) { return (static_cast<std::int64_t>(cols) + 7) / 8 * 8; }

struct LtMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;
  bool supported = false;
  ~Plan() {
    const CublasLt& lt = cublaslt();  // opened: the LtMatmul that made this plan opened it
    lt.cublasLtMatrixLayoutDestroy(c);
    lt.cublasLtMatrixLayoutDestroy(b);
    lt.cublasLtMatrixLayoutDestroy(a);
    lt.cublasLtMatmulDescDestroy(desc);
  }
};

LtMatmul::LtMatmul(bool tf32, bool deterministic, std::size_t workspace_bytes)
    : tf32_(tf32), deterministic_(deterministic), workspace_(workspace_bytes) {
  const CublasLt& lt = cublaslt();
  CUBLAS_CHECK(lt.cublasLtCreate(&handle_));
}

LtMatmul::~LtMatmul() {
  const CublasLt& lt = cublaslt();
  for (auto& [key, plan] : plans_) delete plan;
  lt.cublasLtDestroy(handle_);
}

LtMatmul::Plan* LtMatmul::plan_for(const MatmulArgs& x) {
  const Key key{x.trans_a,
                x.trans_b,
                x.m,
                x.n,
                x.k,
                x.lda,
                x.ldb,
                x.ldc,
                static_cast<int>(x.ab_type),
                static_cast<int>(x.c_type),
                static_cast<int>(x.epilogue),
                x.beta != 0.0f,
                x.aux_ld,
                alignment_of(x.a),
                alignment_of(x.b),
                alignment_of(x.c),
                alignment_of(x.bias),
                alignment_of(x.aux)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second->supported ? it->second : nullptr;
  const CublasLt& lt = cublaslt();
  auto* plan = new Plan;
  plans_[key] = plan;

  const bool bf16 = x.ab_type == DataType::kBF16;
  const cublasComputeType_t compute = !bf16 && tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(lt.cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  // cuBLASLt's A is our B and its B our A (row-major C = op(A) op(B) as C^T = op(B)^T op(A)^T).
  const cublasOperation_t lt_trans_a = x.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t lt_trans_b = x.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, lt_trans_a);
  set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, lt_trans_b);
  set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(x.epilogue));
  if (x.epilogue != Epilogue::kNone) set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, x.bias);
  if (uses_aux(x.epilogue)) {
    set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, x.aux);
    set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, x.aux_ld);
  }
  // Stored (column-major) shapes: cuBLASLt's op(A) is [M=n, K=k], op(B) is [K=k, N=m], D [n, m].
  const std::uint64_t m = x.m, n = x.n, k = x.k;
  CUBLAS_CHECK(
      lt.cublasLtMatrixLayoutCreate(&plan->a, cuda_type(x.ab_type), x.trans_b ? k : n, x.trans_b ? n : k, x.ldb));
  CUBLAS_CHECK(
      lt.cublasLtMatrixLayoutCreate(&plan->b, cuda_type(x.ab_type), x.trans_a ? m : k, x.trans_a ? k : m, x.lda));
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&plan->c, cuda_type(x.c_type), n, m, x.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(lt.cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t workspace = workspace_.size();
  const std::uint32_t align_a = alignment_of(x.b), align_b = alignment_of(x.a), align_c = alignment_of(x.c);
  const std::uint32_t reductions = deterministic_ ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_MASK;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> prefs[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c},
      {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions}};
  cublasStatus_t status = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                  &workspace, sizeof workspace);
  for (const auto& [attr, value] : prefs)
    if (status == CUBLAS_STATUS_SUCCESS)
      status = lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, value, sizeof(std::uint32_t));
  if (status != CUBLAS_STATUS_SUCCESS) {
    lt.cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(status);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  status = lt.cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result,
                                             &found);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED means no kernel for this combination: a fact to report, not an error here.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return nullptr;
  CUBLAS_CHECK(status);
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  plan->supported = true;
  return plan;
}

bool LtMatmul::supports(const MatmulArgs& args) { return plan_for(args) != nullptr; }

void LtMatmul::run(const MatmulArgs& x, cudaStream_t stream) {
  const CublasLt& lt = cublaslt();
  Plan* plan = plan_for(x);
  if (!plan) CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);  // names cuBLASLt's status and this line
  // The plan is shared by every call of this shape: its pointers are this call's.
  if (x.epilogue != Epilogue::kNone) set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, x.bias);
  if (uses_aux(x.epilogue)) set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, x.aux);
  CUBLAS_CHECK(lt.cublasLtMatmul(handle_, plan->desc, &x.alpha, x.b, plan->a, x.a, plan->b, &x.beta, x.c, plan->c, x.c,
                                 plan->c, &plan->algo, workspace_.data(), plan->workspace, stream));
}

}  // namespace slurm_train::cuda
