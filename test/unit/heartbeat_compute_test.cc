#include "launcher/heartbeat_compute.h"

#include <doctest/doctest.h>

using namespace slurm_train;

TEST_CASE("heartbeat compute: the program's compute seconds, once for every step the heartbeat advanced") {
  HeartbeatCompute c;
  CHECK(c.observe(1.0, 10, 0.05).steps == 0);  // the first heartbeat: how many steps it ends is unknown
  StepCompute got = c.observe(1.2, 11, 0.05);
  CHECK(got.steps == 1);
  CHECK(got.seconds_per_step == doctest::Approx(0.05));
  got = c.observe(1.5, 14, 0.04);  // three steps between two looks: the last one's figure for each
  CHECK(got.steps == 3);
  CHECK(got.seconds_per_step == doctest::Approx(0.04));
  CHECK(c.observe(1.7, 14, 0.04).steps == 0);  // the same step again (touched): nothing new
}

TEST_CASE("heartbeat compute: a step alone gives the pace, wall seconds over the steps advanced") {
  HeartbeatCompute c;
  CHECK(c.observe(2.0, 0, std::nullopt).steps == 0);
  CHECK(c.observe(2.5, 0, std::nullopt).steps == 0);  // touched: the pace runs from the step's start
  StepCompute got = c.observe(3.0, 4, std::nullopt);
  CHECK(got.steps == 4);
  CHECK(got.seconds_per_step == doctest::Approx(0.25));
  got = c.observe(3.6, 7, std::nullopt);
  CHECK(got.steps == 3);
  CHECK(got.seconds_per_step == doctest::Approx(0.2));
}

TEST_CASE("heartbeat compute: a step that goes back starts the pace anew and gives nothing") {
  HeartbeatCompute c;
  c.observe(1.0, 100, std::nullopt);
  CHECK(c.observe(2.0, 50, std::nullopt).steps == 0);
  CHECK(c.observe(2.0, 50, 0.1).steps == 0);
  const StepCompute got = c.observe(3.0, 52, std::nullopt);
  CHECK(got.steps == 2);
  CHECK(got.seconds_per_step == doctest::Approx(0.5));
}
