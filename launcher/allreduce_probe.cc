#include "launcher/allreduce_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "launcher/allreduce_sweep.h"
#include "spank/jobenv/host.h"
#include "train/steps/device.h"

#if defined(SLURM_TRAIN_WITH_CUDA)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "train/comm/comm_nccl.h"
#endif

namespace slurm_train {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The probe's buffer of floats, where its Comm reads it: host memory for MPI, the GPU's for NCCL
// (filled and checked through the host copy).
class ProbeBuffer {
 public:
  explicit ProbeBuffer(std::size_t n, bool on_gpu) : host_(n) {
#if defined(SLURM_TRAIN_WITH_CUDA)
    if (on_gpu) device_.resize(n);
#else
    (void)on_gpu;
#endif
  }
  float* data() {
#if defined(SLURM_TRAIN_WITH_CUDA)
    if (device_.data()) return device_.data();
#endif
    return host_.data();
  }
  void fill(float value, std::size_t n) {
    std::fill_n(host_.begin(), n, value);
#if defined(SLURM_TRAIN_WITH_CUDA)
    if (device_.data()) CUDA_CHECK(cudaMemcpy(device_.data(), host_.data(), n * sizeof(float), cudaMemcpyHostToDevice));
#endif
  }
  // Elements among the first n that are not `value`.
  long long count_not(float value, std::size_t n) {
#if defined(SLURM_TRAIN_WITH_CUDA)
    if (device_.data()) CUDA_CHECK(cudaMemcpy(host_.data(), device_.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
#endif
    return std::count_if(host_.begin(), host_.begin() + static_cast<std::ptrdiff_t>(n),
                         [value](float x) { return x != value; });
  }
  // NCCL queues collectives on its stream, so a batch is issued before waiting once (as
  // nccl-tests does); MPI's in-place sums are blocking calls, one after another.
  bool batches() const {
#if defined(SLURM_TRAIN_WITH_CUDA)
    return device_.data() != nullptr;
#else
    return false;
#endif
  }

 private:
  std::vector<float> host_;
#if defined(SLURM_TRAIN_WITH_CUDA)
  cuda::DeviceBuffer<float> device_;
#endif
};

struct Transport {
  std::unique_ptr<Comm> device_comm;  // NCCL, or null: the host Comm (MPI)
  std::unique_ptr<ProbeBuffer> buffer;
  std::string name;  // "NCCL on GPUs" or "MPI on CPUs"
};

// NCCL when every rank sees a GPU (a mixed job would mix collectives and hang), else MPI.
Transport choose_transport(Comm& comm, std::size_t floats) {
  Transport t;
  const CudaProbe probe = probe_cuda();
  double with_gpu = probe.devices > 0 ? 1.0 : 0.0;
  comm.allreduce_sum(&with_gpu, 1);
#if defined(SLURM_TRAIN_WITH_CUDA)
  if (with_gpu == comm.size()) {
    const int gpu = gpu_for_rank(-1, probe.devices, comm.local_rank(), comm.local_size());
    CUDA_CHECK(cudaSetDevice(gpu));
    t.buffer = std::make_unique<ProbeBuffer>(floats, true);
    t.device_comm = make_nccl_comm(comm, {gpu, nullptr, std::chrono::seconds(600)});
    t.name = "NCCL on GPUs";
    return t;
  }
#endif
  t.buffer = std::make_unique<ProbeBuffer>(floats, false);
  t.name = with_gpu > 0 ? fmt::format("MPI on CPUs ({} of {} ranks see no GPU)", comm.size() - with_gpu, comm.size())
                        : "MPI on CPUs";
  return t;
}

// `iterations` in-place sums of the first n floats; seconds one took, averaged over the ranks.
double time_allreduce(Comm& comm, Comm& via, ProbeBuffer& buffer, std::size_t n, int iterations) {
  comm.barrier();
  const double start = now_seconds();
  for (int i = 0; i < iterations; ++i) {
    if (buffer.batches()) {
      via.start_allreduce_sum(buffer.data(), n);
    } else {
      via.allreduce_sum(buffer.data(), n);
    }
  }
  via.wait_all();
  double seconds = (now_seconds() - start) / iterations;
  comm.allreduce_sum(&seconds, 1);
  return seconds / comm.size();
}

// Rank 0's decision, the same on every rank.
int agree(Comm& comm, int value) {
  comm.broadcast(&value, sizeof value, 0);
  return value;
}

// The ring: one rank a node (the first of each) when the job spans nodes, so that each link
// crosses the network; every rank when it runs on one node. Rank numbers, in rank order.
std::vector<int> ring_members(Comm& comm) {
  double first = comm.local_rank() == 0 ? 1.0 : 0.0;
  std::vector<double> firsts(static_cast<std::size_t>(comm.size()), 0.0);
  firsts[static_cast<std::size_t>(comm.rank())] = first;
  comm.allreduce_sum(firsts.data(), firsts.size());
  std::vector<int> members;
  const bool one_node = comm.local_size() == comm.size();
  for (int r = 0; r < comm.size(); ++r)
    if (one_node || firsts[static_cast<std::size_t>(r)] > 0) members.push_back(r);
  return members;
}

// Each link member i -> member i+1 alone in its phase (a rank sends or receives, never both):
// even i, then odd i, then the last link of an odd ring; one untimed message each first. Returns
// this rank's incoming GB/s, or -1 (not in the ring, or no timed iteration).
double time_links(Comm& comm, Comm& via, ProbeBuffer& buffer, const std::vector<int>& members, std::size_t bytes,
                  int iterations) {
  const int m = static_cast<int>(members.size());
  const auto me = std::find(members.begin(), members.end(), comm.rank());
  const int i = me == members.end() ? -1 : static_cast<int>(me - members.begin());
  const auto phase_of = [m](int link) { return (m % 2 == 1 && link == m - 1) ? 2 : link % 2; };
  double incoming = -1;
  for (int phase = 0; phase < 3; ++phase) {
    comm.barrier();
    if (i < 0 || m < 2) continue;
    const int out = i, in = (i - 1 + m) % m;  // the link this rank sends on, the one it receives on
    if (phase_of(out) == phase) {
      for (int k = 0; k <= iterations; ++k)
        via.send(buffer.data(), bytes, members[static_cast<std::size_t>((i + 1) % m)]);
    }
    if (phase_of(in) == phase) {
      const int from = members[static_cast<std::size_t>(in)];
      via.receive(buffer.data(), bytes, from);  // the first, untimed: connections open lazily
      const double start = now_seconds();
      for (int k = 0; k < iterations; ++k) via.receive(buffer.data(), bytes, from);
      if (iterations > 0) incoming = algorithm_bandwidth(bytes, (now_seconds() - start) / iterations);
    }
  }
  return incoming;
}

std::vector<std::string> node_names(Comm& comm) {
  const std::string mine = host_name();
  const auto parts = comm.gather_bytes(mine.data(), mine.size(), 0);
  std::vector<std::string> names;
  for (const auto& p : parts) names.emplace_back(p.begin(), p.end());
  return names;
}

}  // namespace

bool run_allreduce_probe(Comm& comm, const AllreduceProbeOptions& o, std::ostream& out) {
  const std::vector<std::size_t> sizes = message_sizes(o.max_bytes);
  Transport t = choose_transport(comm, o.max_bytes / sizeof(float));
  Comm& via = t.device_comm ? *t.device_comm : comm;
  const std::vector<std::string> nodes = node_names(comm);
  const bool root = comm.rank() == 0;
  // Every link of the ring opened before anything is timed (MPI connects peers on first use).
  const std::vector<int> members = ring_members(comm);
  time_links(comm, via, *t.buffer, members, sizeof(float), 0);
  if (root) {
    std::vector<std::string> distinct = nodes;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    out << fmt::format(
               "all-reduce over {}: {} rank(s) on {} node(s); float32 sums in place, {} to {}; at most "
               "{:g} s\n",
               t.name, comm.size(), distinct.size(), size_name(sizes.front()), size_name(sizes.back()), o.seconds)
        << sweep_header() << std::flush;
  }

  const double started = now_seconds();
  std::vector<SweepRow> rows;
  long long wrong = 0;
  std::string stopped;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const std::size_t n = sizes[s] / sizeof(float);
    // Zeros while timing: repeated in-place sums of anything else grow without bound.
    t.buffer->fill(0.0f, n);
    const double one = time_allreduce(comm, via, *t.buffer, n, 1);  // also the warm-up
    const int iterations =
        agree(comm, plan_iterations(one, o.seconds - (now_seconds() - started), static_cast<int>(sizes.size() - s)));
    if (iterations == 0) {
      stopped = fmt::format("stopped before {}: one more size would pass the bound of {:g} s (--allreduce-seconds)",
                            size_name(sizes[s]), o.seconds);
      break;
    }
    SweepRow row{sizes[s], time_allreduce(comm, via, *t.buffer, n, iterations), iterations, 0};
    // The check: rank r adds r + 1, so every element must be n(n+1)/2, exact in float32 here.
    t.buffer->fill(static_cast<float>(comm.rank() + 1), n);
    via.allreduce_sum(t.buffer->data(), n);
    double bad = static_cast<double>(
        t.buffer->count_not(static_cast<float>(comm.size()) * static_cast<float>(comm.size() + 1) / 2.0f, n));
    comm.allreduce_sum(&bad, 1);
    row.wrong = static_cast<long long>(bad);
    wrong += row.wrong;
    rows.push_back(row);
    if (root) out << sweep_row(row, comm.size()) << std::flush;
  }

  const std::size_t link_bytes = std::min<std::size_t>(o.max_bytes, std::size_t{8} << 20);
  const double incoming = time_links(comm, via, *t.buffer, members, link_bytes, 3);
  const auto speeds = comm.gather_bytes(&incoming, sizeof incoming, 0);

  if (!root) return agree(comm, 0) == 0;
  out << sweep_average(rows, comm.size());
  if (!stopped.empty()) out << stopped << "\n";
  std::vector<LinkSpeed> links;
  const int m = static_cast<int>(members.size());
  for (int i = 0; i < m && m > 1; ++i) {
    const int to = members[static_cast<std::size_t>(i)], from = members[static_cast<std::size_t>((i - 1 + m) % m)];
    double gbps = 0;
    std::memcpy(&gbps, speeds[static_cast<std::size_t>(to)].data(), sizeof gbps);
    links.push_back({from, to, nodes[static_cast<std::size_t>(from)], nodes[static_cast<std::size_t>(to)], gbps});
  }
  const LinkVerdict links_verdict = judge_links(links);
  out << fmt::format("links ({} a message, each link alone, {}):\n", size_name(link_bytes),
                     comm.local_size() == comm.size() ? "a ring of this node's ranks" : "a ring of one rank a node");
  // Every link up to a screenful; beyond, the verdict names the one that matters.
  if (links.size() <= 16) out << link_lines(links);
  out << links_verdict.line << "\n";
  std::vector<std::string> failures;
  if (wrong > 0) failures.push_back(fmt::format("{} element(s) of the sums were wrong", wrong));
  if (o.min_busbw > 0 && !rows.empty()) {
    const double busbw =
        allreduce_bus_bandwidth(algorithm_bandwidth(rows.back().bytes, rows.back().seconds), comm.size());
    if (busbw < o.min_busbw)
      failures.push_back(fmt::format("bus bandwidth {:.2f} GB/s at {} is below --min-busbw {:g}", busbw,
                                     size_name(rows.back().bytes), o.min_busbw));
  }
  if (!failures.empty()) {
    out << "allreduce: FAIL: " << fmt::format("{}", fmt::join(failures, "; ")) << "\n";
  } else {
    out << (links_verdict.slow ? "allreduce: WARN: a slow link (above)\n" : "allreduce: ok\n");
  }
  out << std::flush;
  return agree(comm, failures.empty() ? 0 : 1) == 0;
}

}  // namespace slurm_train
