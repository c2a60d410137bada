// The rows a run trains and evaluates on, as the training loop sees them: how many there are,
// and rows gathered into a batch. A classifier's row is one labelled sample, its features
// normalised; a language model's row is a window of `block` tokens and the `block` tokens that
// follow each (the targets). The batches (batches.h), the prefetcher and the evaluation work on
// rows alone and so serve both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/dataset.h"

namespace slurm_train {

struct Batch {
  std::uint64_t step = 0;       // global step this batch belongs to
  std::uint64_t first_row = 0;  // global row index of the first row: step * B + slice begin
  int rows = 0;
  std::vector<float> x;              // classifier: rows x features, normalised
  std::vector<std::int32_t> tokens;  // language model: rows x block
  std::vector<std::int32_t> y;       // labels [rows], or the next tokens [rows x block]
};

class Samples {
 public:
  virtual ~Samples() = default;
  virtual std::size_t count() const = 0;
  // Predictions a row holds: 1 for a classifier, block for a language model. Losses are means
  // over predictions.
  virtual std::size_t predictions_per_row() const = 0;
  // Rows ids[0, n) into b's x/tokens and y (resized); b.rows = n.
  virtual void gather(const std::uint32_t* ids, std::size_t n, Batch& b) const = 0;
  // Rows [begin, begin + n).
  void gather_range(std::size_t begin, std::size_t n, Batch& b) const;
};

// A labelled dataset, normalised with `norm` (the training set's).
class LabelledSamples final : public Samples {
 public:
  LabelledSamples(Dataset data, Normalization norm) : data_(std::move(data)), norm_(norm) {}
  std::size_t count() const override { return data_.count; }
  std::size_t predictions_per_row() const override { return 1; }
  void gather(const std::uint32_t* ids, std::size_t n, Batch& b) const override;
  const Dataset& data() const { return data_; }

 private:
  Dataset data_;
  Normalization norm_;
};

// Non-overlapping windows of a token stream: row i is tokens [i*block, i*block + block) and its
// targets the same positions plus one. (N - 1) / block rows: every token but the very first is a
// target once.
class TokenWindows final : public Samples {
 public:
  TokenWindows(std::vector<std::uint8_t> tokens, int block) : tokens_(std::move(tokens)), block_(block) {}
  std::size_t count() const override {
    return tokens_.empty() ? 0 : (tokens_.size() - 1) / static_cast<std::size_t>(block_);
  }
  std::size_t predictions_per_row() const override { return static_cast<std::size_t>(block_); }
  void gather(const std::uint32_t* ids, std::size_t n, Batch& b) const override;
  std::size_t tokens() const { return tokens_.size(); }

 private:
  std::vector<std::uint8_t> tokens_;
  int block_;
};

}  // namespace slurm_train
