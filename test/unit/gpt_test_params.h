// GPT parameters for tests of a trained model's behaviour (the CPU and the CUDA decoders').
// GPT-2's initialisation is too small to test much: its logits are all near 0 and its attention
// near uniform. Matrices 10 times larger (std 0.2) and every parameter moved by up to 0.1 give
// logits of order 1, peaked attention, and biases and LayerNorm weights that matter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/elementwise.h"
#include "train/models/gpt.h"

namespace slurm_train::testing {

inline HostVector<float> trained_looking_params(const GptConfig& g, std::uint64_t seed) {
  HostVector<float> p;
  gpt_initialize(g, seed, p);
  for (const auto& t : gpt_layout(g))
    if (t.shape.size() == 2)
      for (std::size_t i = 0; i < t.size; ++i) p[t.offset + i] *= 10.0f;
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.1f * (2.0f * kernels::uniform_from_counter(seed, 7, i) - 1.0f);
  return p;
}

}  // namespace slurm_train::testing
