#include "train/io/memory_budget.h"

#include <doctest/doctest.h>

#include <limits>

#include "test/unit/test_support.h"

using namespace slurm_train;

TEST_CASE("memory budget: sizes are overflow-checked") {
  CHECK(checked_bytes({1u << 20, 1u << 20}, 4) == std::uint64_t{1} << 42);
  CHECK(checked_bytes({}, 4) == 4u);
  CHECK_FALSE(checked_bytes({1ull << 32, 1ull << 32}, 1).has_value());
  CHECK_FALSE(checked_bytes({1ull << 31, 1ull << 31, 4}, 2).has_value());
}

TEST_CASE("memory budget: /proc fields in bytes, and the tightest limit wins") {
  const std::string meminfo = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:    2000000 kB\n";
  CHECK(kib_field(meminfo, "MemAvailable") == 2000000ull * 1024);
  CHECK(kib_field(meminfo, "MemFree") == 1024u);
  CHECK_FALSE(kib_field(meminfo, "VmSize").has_value());
  CHECK_FALSE(kib_field(meminfo, "Mem").has_value());

  MemoryFacts f;
  CHECK(allocatable_bytes(f) == std::numeric_limits<std::uint64_t>::max());
  f.mem_available = 8ull << 30;
  CHECK(allocatable_bytes(f) == 8ull << 30);
  f.limit_as = 2ull << 30;  // ulimit -v 2 GiB, 500 MiB of it mapped already
  f.mapped = 500ull << 20;
  CHECK(allocatable_bytes(f) == (2ull << 30) - (500ull << 20));
  f.limit_data = 1ull << 30;
  f.data = 2ull << 30;  // already over
  CHECK(allocatable_bytes(f) == 0);
}

TEST_CASE("memory budget: a request beyond the limit names what, how much and why") {
  MemoryFacts f;
  f.mem_available = 4ull << 30;
  f.limit_as = 2ull << 30;
  f.mapped = 1ull << 30;
  require_memory("data", 1ull << 29, "small", f);
  testing::check_refused<MemoryError>([&] { require_memory("f.h5:/x", 3ull << 30, "float32 of [3, 2^28]", f); },
                                      "f.h5:/x needs 3.0 GiB (float32 of [3, 2^28]), but only 1.0 GiB can be allocated "
                                      "here (MemAvailable 4.0 GiB, ulimit -v 2.0 GiB of which 1.0 GiB mapped)");
  testing::check_refused<MemoryError>([&] { require_memory("model", std::nullopt, "overflow", f); },
                                      "model needs more than 16 EiB (overflow)");
}
