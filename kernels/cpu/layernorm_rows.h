// LayerNorm over rows of C floats, forward and backward, as kernels/cpu/transformer_ops.h's
// plain loops (the reference they are tested against, test/unit/layernorm_rows_test.cc) but
// vectorized: each row's sums run in fixed lanes, combined in lane order, so every vector width
// gives the same bits. The same contract: mean and rstd kept per row; the backward pass adds
// into dx, dweight and dbias.
#pragma once

namespace slurm_train::kernels {

void layernorm_rows_forward(int rows, int C, const float* x, const float* weight, const float* bias, float* out,
                            float* mean, float* rstd, float eps = 1e-5f);

void layernorm_rows_backward(int rows, int C, const float* x, const float* weight, const float* mean, const float* rstd,
                             const float* dout, float* dx, float* dweight, float* dbias);

}  // namespace slurm_train::kernels
