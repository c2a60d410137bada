// The progress line, durations and the moving mean.
#include <doctest/doctest.h>

#include "launcher/progress_line.h"

using namespace slurm_train;

TEST_CASE("progress line, durations and the moving mean") {
  CHECK(format_duration(42) == "42 s");
  CHECK(format_duration(185) == "3:05");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_progress(1200, 4800, 0.41234, 51234.4, 185) ==
        "step 1200/4800 (25%)  loss 0.4123  samples/s 51234  eta 3:05");
  CHECK(format_progress(10, 40, 2.5, 100.4, 5, 128) == "step 10/40 (25%)  loss 2.5000  tokens/s 12851  eta 5 s");
  MovingMean m(2);
  m.add(1);
  m.add(2);
  m.add(4);
  CHECK(m.mean() == doctest::Approx(3.0));
}
