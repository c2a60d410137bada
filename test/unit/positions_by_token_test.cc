// group_positions_by_token (kernels/positions_by_token.h): the embedding backward's index of a batch.
#include "kernels/positions_by_token.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using slurm_train::kernels::group_positions_by_token;
using slurm_train::kernels::PositionsByToken;

TEST_CASE("positions by token: distinct tokens ascending, each one's positions in order, every position once") {
  const std::vector<std::int32_t> tokens{5, 2, 5, 0, 2, 5, 9};
  PositionsByToken by;
  std::vector<std::int32_t> counts;
  group_positions_by_token(tokens.data(), tokens.size(), 10, by, counts);
  CHECK(by.tokens == std::vector<std::int32_t>{0, 2, 5, 9});
  CHECK(by.starts == std::vector<std::int32_t>{0, 1, 3, 6, 7});
  CHECK(by.positions == std::vector<std::int32_t>{3, 1, 4, 0, 2, 5, 6});
}

TEST_CASE("positions by token: a random batch of a large vocabulary against a direct scan, the vectors reused") {
  PositionsByToken by;
  std::vector<std::int32_t> counts;
  std::mt19937 rng(3);
  for (const int vocab : {50304, 3}) {
    CAPTURE(vocab);
    std::vector<std::int32_t> tokens(4096);
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
    group_positions_by_token(tokens.data(), tokens.size(), vocab, by, counts);
    REQUIRE(by.starts.size() == by.tokens.size() + 1);
    CHECK(by.starts.back() == static_cast<std::int32_t>(tokens.size()));
    std::size_t seen = 0;
    for (std::size_t i = 0; i < by.tokens.size(); ++i) {
      if (i > 0) CHECK(by.tokens[i - 1] < by.tokens[i]);
      std::vector<std::int32_t> want;
      for (std::size_t p = 0; p < tokens.size(); ++p)
        if (tokens[p] == by.tokens[i]) want.push_back(static_cast<std::int32_t>(p));
      const auto first = by.positions.begin();
      CHECK(std::vector<std::int32_t>(first + by.starts[i], first + by.starts[i + 1]) == want);
      seen += want.size();
    }
    CHECK(seen == tokens.size());
  }
}

TEST_CASE("positions by token: an empty batch, and a token outside the vocabulary named with its position") {
  PositionsByToken by;
  std::vector<std::int32_t> counts;
  group_positions_by_token(nullptr, 0, 4, by, counts);
  CHECK(by.tokens.empty());
  CHECK(by.starts == std::vector<std::int32_t>{0});
  const std::vector<std::int32_t> bad{1, 4};
  try {
    group_positions_by_token(bad.data(), bad.size(), 4, by, counts);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "group_positions_by_token: token 4 at position 1 is outside the vocabulary [0, 4)");
  }
  const std::vector<std::int32_t> negative{-1};
  CHECK_THROWS_AS(group_positions_by_token(negative.data(), 1, 4, by, counts), std::invalid_argument);
}
