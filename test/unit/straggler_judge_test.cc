#include "launcher/straggler_judge.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("straggler judge: a rank above 1.2x the median for 3 windows in a row is named once, with its figures") {
  StragglerJudge judge(4, 1.2, 3);
  for (int w = 0; w < 5; ++w) {
    for (int r = 0; r < 4; ++r) judge.add(r, r == 2 ? 0.030 : 0.020, 10);
    const auto found = judge.close_window();
    if (w == 2) {
      REQUIRE(found.size() == 1);
      CHECK(found[0].rank == 2);
      CHECK(found[0].slowdown == doctest::Approx(1.5));
      CHECK(found[0].compute_seconds == doctest::Approx(0.030));
      CHECK(found[0].median_seconds == doctest::Approx(0.020));
    } else {
      CHECK(found.empty());  // not before its third window, and not again after
    }
    CHECK(judge.slowdown(2) == doctest::Approx(1.5));
  }
}

TEST_CASE("straggler judge: two ranks: the slow one is measured against the healthy one (the lower median)") {
  StragglerJudge judge(2, 1.2, 1);
  judge.add(0, 0.010);
  judge.add(1, 0.014);
  const auto found = judge.close_window();
  REQUIRE(found.size() == 1);
  CHECK(found[0].rank == 1);
  CHECK(found[0].slowdown == doctest::Approx(1.4));
}

TEST_CASE("straggler judge: noise below the threshold, or a window back under it, names nobody") {
  StragglerJudge judge(3, 1.2, 3);
  const double times[4][3] = {
      {0.020, 0.021, 0.023}, {0.022, 0.020, 0.021}, {0.020, 0.026, 0.020}, {0.021, 0.020, 0.020}};
  for (const auto& window : times) {
    for (int r = 0; r < 3; ++r) judge.add(r, window[r], 5);
    CHECK(judge.close_window().empty());
  }
  // Slow in two windows, normal in one, slow in two: never three in a row.
  for (const bool slow : {true, true, false, true, true}) {
    judge.add(0, 0.020);
    judge.add(1, 0.020);
    judge.add(2, slow ? 0.040 : 0.020);
    CHECK(judge.close_window().empty());
  }
}

TEST_CASE("straggler judge: a rank without a step in a window keeps its count and stays out of the median") {
  StragglerJudge judge(3, 1.2, 2);
  judge.add(0, 0.010), judge.add(1, 0.010), judge.add(2, 0.030);
  CHECK(judge.close_window().empty());
  judge.add(0, 0.010), judge.add(1, 0.010);  // rank 2 took no step
  CHECK(judge.close_window().empty());
  CHECK(judge.slowdown(2) == 0);
  judge.add(0, 0.010), judge.add(1, 0.010), judge.add(2, 0.030);
  const auto found = judge.close_window();
  REQUIRE(found.size() == 1);
  CHECK(found[0].rank == 2);
  // One rank alone has nobody to be slower than.
  StragglerJudge alone(1, 1.2, 1);
  alone.add(0, 5.0);
  CHECK(alone.close_window().empty());
}
