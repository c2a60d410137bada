// A batch's positions grouped by token, as the embedding's backward pass adds them: for each
// distinct token (ascending), the positions that hold it, in position order. Built on the host,
// where the batch's tokens are, by a counting sort: the GPU then adds each token's gradient rows
// in the reference's order with one block per token present, instead of every vocabulary row's
// block scanning the whole batch for its token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train::kernels {

struct PositionsByToken {
  std::vector<std::int32_t> tokens;     // the distinct tokens, ascending
  std::vector<std::int32_t> starts;     // tokens.size() + 1 offsets into positions
  std::vector<std::int32_t> positions;  // every position, grouped by token, ascending within a token
};

// Into `out` (its vectors reused from call to call). Throws std::invalid_argument for a token
// outside [0, vocab) or more than 2^31 - 1 positions.
inline void group_positions_by_token(const std::int32_t* tokens, std::size_t n, int vocab, PositionsByToken& out,
                                     std::vector<std::int32_t>& counts) {
  if (n > 0x7fffffffu)
    throw std::invalid_argument("group_positions_by_token: " + std::to_string(n) + " positions: at most 2^31 - 1");
  counts.assign(static_cast<std::size_t>(vocab > 0 ? vocab : 0), 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      throw std::invalid_argument("group_positions_by_token: token " + std::to_string(tokens[i]) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ++counts[static_cast<std::size_t>(tokens[i])];
  }
  out.tokens.clear();
  out.starts.clear();
  std::int32_t at = 0;
  for (int v = 0; v < vocab; ++v) {
    const std::int32_t count = counts[static_cast<std::size_t>(v)];
    if (count == 0) continue;
    out.tokens.push_back(v);
    out.starts.push_back(at);
    counts[static_cast<std::size_t>(v)] = at;  // now where v's next position goes
    at += count;
  }
  out.starts.push_back(at);
  out.positions.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t& next = counts[static_cast<std::size_t>(tokens[i])];
    out.positions[static_cast<std::size_t>(next++)] = static_cast<std::int32_t>(i);
  }
}

}  // namespace slurm_train::kernels
