// `slurm-train doctor --allreduce`: the all-reduce bandwidth of a job's ranks by message size, as
// nccl-tests' all_reduce_perf reports it, and the ring's slowest link. The arithmetic and the
// report are here, apart from the collectives (allreduce_probe.cc), so that they are unit-tested.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace slurm_train {

// "64M", "1G", "512K", "4096": bytes (K, M, G are powers of 1024). Throws InputError naming the
// value unless it is a whole number of bytes from 8 to 16 GiB.
std::size_t parse_message_size(std::string_view text);

// 8 B, 16 B, ... doubling up to max_bytes, which ends the list even when not a power of two.
std::vector<std::size_t> message_sizes(std::size_t max_bytes);

// nccl-tests' figures: algorithm bandwidth = bytes / time; an all-reduce's bus bandwidth is that
// times 2(n-1)/n, the share of the data each rank's link carries (comparable across n). GB/s, 1e9.
double algorithm_bandwidth(std::size_t bytes, double seconds);
double allreduce_bus_bandwidth(double algbw, int ranks);

// Timed iterations for the next size, from the seconds one operation of it took, the seconds left
// of the bound and the sizes left (this one included): what fits in half of an even share of the
// time left, at least 1, at most max_iterations; 0 when one more operation would pass the bound.
int plan_iterations(double one_op_seconds, double seconds_left, int sizes_left, int max_iterations = 20);

struct SweepRow {
  std::size_t bytes = 0;
  double seconds = 0;  // one operation, averaged over the iterations
  int iterations = 0;
  long long wrong = 0;  // elements of the checked result that were not the expected sum
};

// "8 B", "512 KiB", "64 MiB", "1 GiB": a size as the report names it.
std::string size_name(std::size_t bytes);

std::string sweep_header();
std::string sweep_row(const SweepRow& row, int ranks);
// nccl-tests' closing line: the bus bandwidth averaged over the sizes.
std::string sweep_average(const std::vector<SweepRow>& rows, int ranks);

// One link of the ring test: rank `from` sends `bytes` to rank `to` while every rank does the same.
struct LinkSpeed {
  int from = 0, to = 0;
  std::string from_node, to_node;
  double gbps = 0;  // GB/s, 1e9
};

struct LinkVerdict {
  bool slow = false;  // a link or a node below half the speed of the others
  std::string line;   // the slowest link against the others; the slow node when two slow links share one
};

// "rank 0 (node1) -> rank 1 (node2) 1.234 GB/s", one link a line.
std::string link_lines(const std::vector<LinkSpeed>& links);

// A slow node slows both the link into it and the link out of it, so the links are measured
// against the median of all but the two slowest. When both of those are below half of it and
// share a node, that node is named; when only the slowest is, that link.
LinkVerdict judge_links(const std::vector<LinkSpeed>& links);

}  // namespace slurm_train
