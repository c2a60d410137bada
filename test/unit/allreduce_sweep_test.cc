#include "launcher/allreduce_sweep.h"

#include <doctest/doctest.h>

#include "spank/jobenv/text.h"

using namespace slurm_train;

TEST_CASE("allreduce sweep: message sizes parse with K, M, G suffixes, and a bad one is named") {
  CHECK(parse_message_size("4096") == 4096);
  CHECK(parse_message_size("512K") == 512u << 10);
  CHECK(parse_message_size("64M") == 64u << 20);
  CHECK(parse_message_size("1g") == std::size_t{1} << 30);
  CHECK(parse_message_size("16G") == std::size_t{16} << 30);
  for (const char* bad : {"", "M", "4", "64MB", "-8", "1.5M", "17G", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_message_size(bad), InputError);
  }
  CHECK_THROWS_WITH(parse_message_size("64MB"),
                    "message size '64MB': expected bytes from 8 to 16G, as 4096, 512K, 64M or 1G");
}

TEST_CASE("allreduce sweep: sizes double from 8 B and end at the largest, a power of two or not") {
  CHECK(message_sizes(64) == std::vector<std::size_t>{8, 16, 32, 64});
  CHECK(message_sizes(8) == std::vector<std::size_t>{8});
  CHECK(message_sizes(100) == std::vector<std::size_t>{8, 16, 32, 64, 100});
  const auto sizes = message_sizes(64u << 20);
  CHECK(sizes.size() == 24);
  CHECK(sizes.back() == 64u << 20);
}

TEST_CASE("allreduce sweep: nccl-tests' bandwidths: algbw is bytes over time, busbw scales it by 2(n-1)/n") {
  CHECK(algorithm_bandwidth(1'000'000'000, 0.5) == doctest::Approx(2.0));
  CHECK(algorithm_bandwidth(8, 0) == 0.0);
  CHECK(allreduce_bus_bandwidth(2.0, 2) == doctest::Approx(2.0));
  CHECK(allreduce_bus_bandwidth(2.0, 4) == doctest::Approx(3.0));
  CHECK(allreduce_bus_bandwidth(2.0, 1) == doctest::Approx(2.0));
}

TEST_CASE("allreduce sweep: iterations take half an even share of the time left, within 1 and the most") {
  CHECK(plan_iterations(0.001, 10, 10) == 20);  // 0.5 s a size: capped at the most
  CHECK(plan_iterations(0.1, 10, 10) == 5);     // 0.5 s a size, 0.1 s an operation
  CHECK(plan_iterations(0.9, 10, 10) == 1);     // fewer than one fits its share: still one
  CHECK(plan_iterations(10, 10, 1) == 0);       // one more operation would pass the bound
  CHECK(plan_iterations(11, 10, 3) == 0);
  CHECK(plan_iterations(0, 10, 3, 7) == 7);
}

TEST_CASE("allreduce sweep: sizes are named in the largest unit that divides them") {
  CHECK(size_name(8) == "8 B");
  CHECK(size_name(1536) == "1536 B");
  CHECK(size_name(512u << 10) == "512 KiB");
  CHECK(size_name(64u << 20) == "64 MiB");
  CHECK(size_name(std::size_t{3} << 30) == "3 GiB");
}

TEST_CASE("allreduce sweep: rows print as nccl-tests' do: size, count, time in us, algbw, busbw, wrong") {
  const std::string row = sweep_row({1 << 20, 0.001, 5, 0}, 4);
  CHECK(row == "     1048576       262144  float   sum     1000.00     1.05     1.57       0\n");
  CHECK(sweep_header().find("busbw") != std::string::npos);
  CHECK(sweep_average({{8, 1e-6, 1, 0}, {1 << 20, 0.001, 5, 0}}, 2) ==
        "average bus bandwidth: 0.528 GB/s over 2 size(s)\n");
}

TEST_CASE("allreduce sweep: a node slow both ways is named; one slow link is named as a link; even links pass") {
  std::vector<LinkSpeed> ring = {{0, 1, "node1", "node2", 2.0},
                                 {1, 2, "node2", "node3", 0.3},
                                 {2, 3, "node3", "node4", 0.4},
                                 {3, 0, "node4", "node1", 2.1}};
  LinkVerdict v = judge_links(ring);
  CHECK(v.slow);
  CHECK(v.line ==
        "node node3 is slow: its links in and out run at 0.300 and 0.400 GB/s, below half the others' 2.050; "
        "slowest link rank 1 (node2) -> rank 2 (node3): 0.300 GB/s; the median of the 2 fastest 2.050 GB/s");

  // Three nodes: the one link that does not touch the slow node is the reference.
  v = judge_links({{0, 1, "node1", "node2", 1.9}, {1, 2, "node2", "node3", 0.012}, {2, 0, "node3", "node1", 0.012}});
  CHECK(v.slow);
  CHECK(v.line.rfind("node node3 is slow", 0) == 0);

  ring[2].gbps = 1.9;
  v = judge_links(ring);
  CHECK(v.slow);
  CHECK(v.line ==
        "slowest link rank 1 (node2) -> rank 2 (node3): 0.300 GB/s; the median of the 2 fastest 2.050 GB/s: "
        "below half");

  ring[1].gbps = 1.8;
  v = judge_links(ring);
  CHECK_FALSE(v.slow);
  CHECK(v.line == "slowest link rank 1 (node2) -> rank 2 (node3): 1.800 GB/s; the median of the 2 fastest 2.050 GB/s");

  // Two nodes: each link against the other; a node cannot be told from its peer.
  v = judge_links({{0, 1, "node1", "node2", 0.2}, {1, 0, "node2", "node1", 2.0}});
  CHECK(v.slow);
  CHECK(v.line.rfind("slowest link rank 0 (node1) -> rank 1 (node2)", 0) == 0);

  CHECK(link_lines({ring[0]}) == "  rank 0 (node1) -> rank 1 (node2)  2.000 GB/s\n");
  CHECK_FALSE(judge_links({}).slow);
  CHECK(judge_links({}).line == "no link to test (one rank)");
  CHECK_FALSE(judge_links({ring[0]}).slow);
}
