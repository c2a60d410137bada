// The GPT's decoder (gpt_sampler.h) on a GPU: one position at a time with the keys and values of
// every earlier one cached in GPU memory, in fp32: the products by cuBLASLt (one row each, its
// deterministic algorithms), LayerNorm, GELU and the embedding by the training kernels, and the
// attention of the one query by attention_decode. Its logits equal GptSampler's up to float
// rounding (test/cuda/), so that sample_text draws the same text but where two logits are
// within rounding of each other.
#pragma once

#include <memory>
#include <vector>

#include "train/models/gpt.h"
#include "train/models/gpt_sampler.h"

namespace slurm_train {

// A decoder on GPU `gpu` for parameters packed in gpt_layout(config) order. Throws
// std::invalid_argument when the parameters do not match the layout, std::runtime_error in a
// build without CUDA, and CudaError when the GPU cannot be used.
std::unique_ptr<GptDecoder> make_cuda_gpt_decoder(const GptConfig& config, std::span<const float> params, int gpu);

}  // namespace slurm_train
