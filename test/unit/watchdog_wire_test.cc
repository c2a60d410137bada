// How often the ranks beat, by the job's size.
#include <doctest/doctest.h>

#include "launcher/watchdog_wire.h"

using namespace slurm_train;

TEST_CASE("watchdog: ranks beat every second up to 2,000 ranks and less often beyond, at most every 5 s") {
  CHECK(member_beat_seconds(2) == 1.0);
  CHECK(member_beat_seconds(2000) == 1.0);
  CHECK(member_beat_seconds(4096) == doctest::Approx(2.048));
  CHECK(member_beat_seconds(16384) == 5.0);
  // Up to 10,000 ranks rank 0 reads at most 2,000 beats a second; beyond, the interval stays at 5 s
  // (16,384 ranks: 3,277 a second), so that a hang's table is never more than 5 s old.
  for (int ranks : {2, 1024, 2000, 4096, 10000}) CHECK(ranks / member_beat_seconds(ranks) <= 2000.0 + 1e-9);
  CHECK(member_beat_seconds(65536) == 5.0);
}
