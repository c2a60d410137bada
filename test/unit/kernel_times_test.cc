// The names gpu_check's kernel table shows (bench/kernel_times.h): CUPTI reports mangled names.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "bench/kernel_times.h"

#include <doctest/doctest.h>

TEST_CASE("kernel_display_name: demangled, without the return type and the parameters") {
  using slurm_train::bench::kernel_display_name;
  CHECK(kernel_display_name("_ZN11slurm_train4cuda12flash_detail17flash_dkdv_kernelEiiiifPKfS3_S3_S3_Pf") ==
        "slurm_train::cuda::flash_detail::flash_dkdv_kernel");
  // A template instance keeps its arguments; an anonymous namespace's parentheses stay.
  CHECK(kernel_display_name("_ZN12_GLOBAL__N_112probe_kernelIfEEviPKT_") ==
        "(anonymous namespace)::probe_kernel<float>");
  // cuBLASLt's kernels and the memcpy rows are not C++ names: as they are.
  CHECK(kernel_display_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64") ==
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  CHECK(kernel_display_name(nullptr) == "(unnamed)");
}
#endif
