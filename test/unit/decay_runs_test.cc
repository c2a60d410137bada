#include "train/steps/decay_runs.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "train/models/gpt.h"

using namespace slurm_train;

TEST_CASE("decay runs: the GPT's tensors merge into runs of matrices and of vectors, as gpt_decay_layout decides") {
  const GptConfig g{256, 16, 2, 2, 32};
  const std::vector<ParamTensor> tensors = gpt_layout(g);
  const std::vector<DecayRun> runs = decay_runs(tensors);
  // Runs tile the parameters, alternate between decayed and not, and agree with each tensor.
  REQUIRE(!runs.empty());
  CHECK(runs.front().begin == 0);
  CHECK(runs.back().end == tensors.back().offset + tensors.back().size);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    CHECK(runs[i].begin == runs[i - 1].end);
    CHECK(runs[i].decay != runs[i - 1].decay);
  }
  for (const ParamTensor& t : tensors) {
    const auto run = std::find_if(runs.begin(), runs.end(),
                                  [&](const DecayRun& r) { return r.begin <= t.offset && t.offset < r.end; });
    REQUIRE(run != runs.end());
    CHECK(t.offset + t.size <= run->end);
    CHECK(run->decay == (t.shape.size() >= 2));
  }
  // wte and wpe are one decayed run; ln_1's weight and bias one undecayed run.
  CHECK(runs[0] == DecayRun{0, tensors[2].offset, true});
  CHECK(runs[1] == DecayRun{tensors[2].offset, tensors[4].offset, false});
}

TEST_CASE("decay runs: a shard's part of the runs, cut at its ends; runs outside it left out") {
  const std::vector<DecayRun> runs{{0, 100, true}, {100, 110, false}, {110, 500, true}, {500, 520, false}};
  CHECK(runs_within(runs, 0, 520) == runs);
  CHECK(runs_within(runs, 50, 105) == std::vector<DecayRun>{{50, 100, true}, {100, 105, false}});
  CHECK(runs_within(runs, 100, 110) == std::vector<DecayRun>{{100, 110, false}});
  CHECK(runs_within(runs, 200, 300) == std::vector<DecayRun>{{200, 300, true}});
  CHECK(runs_within(runs, 505, 1000) == std::vector<DecayRun>{{505, 520, false}});
  CHECK(runs_within(runs, 520, 520).empty());
  CHECK(runs_within(runs, 600, 700).empty());
}
