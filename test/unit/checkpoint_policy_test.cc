#include "train/checkpoint/checkpoint_policy.h"

#include <doctest/doctest.h>

#include <map>

using namespace slurm_train;

TEST_CASE("checkpoint policy: file names sort by step and parse back; temp files are not checkpoints") {
  CHECK(checkpoint_file_name(0) == "step-00000000.h5");
  CHECK(checkpoint_file_name(42) == "step-00000042.h5");
  CHECK(checkpoint_file_name(123456789) == "step-123456789.h5");
  CHECK(checkpoint_step_of("step-00000042.h5") == 42u);
  CHECK(checkpoint_step_of("step-123456789.h5") == 123456789u);
  CHECK_FALSE(checkpoint_step_of("step-00000042.h5.tmp"));
  CHECK_FALSE(checkpoint_step_of("step-42.h5"));
  CHECK_FALSE(checkpoint_step_of("step-0000004x.h5"));
  CHECK_FALSE(checkpoint_step_of("latest"));
  CHECK_FALSE(checkpoint_step_of("xstep-00000042.h5"));
}

TEST_CASE("checkpoint policy: a checkpoint every N steps and always at the last") {
  CHECK_FALSE(checkpoint_due(0, 5, 20));
  CHECK(checkpoint_due(5, 5, 20));
  CHECK_FALSE(checkpoint_due(6, 5, 20));
  CHECK(checkpoint_due(20, 5, 20));
  CHECK(checkpoint_due(7, 0, 7));
  CHECK_FALSE(checkpoint_due(3, 0, 7));
  CHECK(checkpoint_due(13, 100, 13));
}

TEST_CASE("checkpoint policy: keep the newest N plus every K-th step") {
  using V = std::vector<std::uint64_t>;
  CHECK(checkpoints_to_remove({10, 20, 30, 40, 50}, 2, 0) == V{30, 20, 10});
  CHECK(checkpoints_to_remove({50, 10, 40, 20, 30}, 2, 20) == V{30, 10});
  CHECK(checkpoints_to_remove({10, 20}, 3, 0).empty());
  CHECK(checkpoints_to_remove({10, 20, 30}, 0, 0).empty());   // 0: keep all
  CHECK(checkpoints_to_remove({10, 10, 20}, 1, 0) == V{10});  // duplicates count once
}

TEST_CASE("checkpoint policy: the newest valid checkpoint wins, each refusal is reported, nothing when none loads") {
  std::map<std::uint64_t, std::string> refusals = {{30, "truncated"},
                                                   {20, "checksum mismatch in /model/layer1.weight"}};
  std::vector<std::string> warnings;
  std::vector<std::uint64_t> tried;
  auto try_load = [&](std::uint64_t step) {
    tried.push_back(step);
    auto it = refusals.find(step);
    return it == refusals.end() ? std::string() : it->second;
  };
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  CHECK(choose_newest_valid({10, 30, 20}, try_load, warn) == 10u);
  CHECK(tried == std::vector<std::uint64_t>{30, 20, 10});
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "step-00000030.h5 is unusable: truncated; falling back to step-00000020.h5");
  CHECK(warnings[1].find("layer1.weight") != std::string::npos);
  warnings.clear();
  CHECK_FALSE(choose_newest_valid({30}, try_load, warn));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("no older checkpoint is left") != std::string::npos);
  CHECK_FALSE(choose_newest_valid({}, try_load, warn));
}
