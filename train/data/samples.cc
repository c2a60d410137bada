#include "train/data/samples.h"

#include <numeric>

namespace slurm_train {

void Samples::gather_range(std::size_t begin, std::size_t n, Batch& b) const {
  std::vector<std::uint32_t> ids(n);
  std::iota(ids.begin(), ids.end(), static_cast<std::uint32_t>(begin));
  gather(ids.data(), n, b);
}

void LabelledSamples::gather(const std::uint32_t* ids, std::size_t n, Batch& b) const {
  const std::size_t f = data_.feature_size;
  b.rows = static_cast<int>(n);
  b.x.resize(n * f);
  b.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    float* row = &b.x[i * f];
    for (std::size_t j = 0; j < f; ++j) row[j] = (data_.raw(ids[i], j) - norm_.mean) * norm_.inv_stddev;
    b.y[i] = data_.labels[ids[i]];
  }
}

void TokenWindows::gather(const std::uint32_t* ids, std::size_t n, Batch& b) const {
  const std::size_t T = static_cast<std::size_t>(block_);
  b.rows = static_cast<int>(n);
  b.tokens.resize(n * T);
  b.y.resize(n * T);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* w = tokens_.data() + static_cast<std::size_t>(ids[i]) * T;
    for (std::size_t t = 0; t < T; ++t) {
      b.tokens[i * T + t] = w[t];
      b.y[i * T + t] = w[t + 1];
    }
  }
}

}  // namespace slurm_train
