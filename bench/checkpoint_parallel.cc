// checkpoint_parallel DIR MB [REPEATS], under an MPI launcher: the write of one checkpoint of
// sharded optimizer state, about MB megabytes (parameters and AdamW's two moments), by every
// rank together (save_checkpoint_parallel: each rank's shard straight to its place) against the
// same state written by rank 0 alone (save_checkpoint: what a replicated run does), alternately.
// Each is timed from a barrier to a barrier and includes the whole commit (fsync, rename, folder
// fsync, `latest`). Rank 0 prints "key value" lines: the medians of REPEATS (default 3).
#include <mpi.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "kernels/kernels.h"
#include "train/checkpoint/checkpoint_parallel.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/comm/comm.h"
#include "train/models/mlp.h"
#include "train/steps/sharded_optimizer.h"

using namespace slurm_train;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

CheckpointState state_of(const ModelLayout& model, std::size_t begin, std::size_t end) {
  CheckpointState s;
  s.model = model;
  s.optimizer = "adamw";
  s.params.resize(end - begin);
  s.first.resize(end - begin);
  s.second.resize(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    s.params[i - begin] = static_cast<float>(i % 1000) * 1e-3f;
    s.first[i - begin] = static_cast<float>(i % 777) * 1e-4f;
    s.second[i - begin] = static_cast<float>(i % 555) * 1e-6f;
  }
  s.counters.seed = 1;
  s.counters.global_batch = 1;
  s.program_version = SLURM_TRAIN_VERSION;
  s.created = "2026-01-01T00:00:00Z";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: checkpoint_parallel DIR MB [REPEATS] (under srun --mpi=pmix or mpirun)\n";
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    const std::string dir = argv[1];
    const double mb = std::atof(argv[2]);
    const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
    auto comm = make_mpi_comm();
    // One layer [out, 1024] and its bias: three arrays of 4-byte values make MB megabytes.
    const int out = std::max(1, static_cast<int>(mb * 1e6 / 12.0 / 1024.0));
    const ModelLayout model = mlp_model_layout(mlp_layout(MlpShape{1024, {}, out}));
    const std::size_t n = model.parameters();
    const auto cuts = shard_cuts(n, comm->size(), kernels::kSumOfSquaresBlock);
    const auto r = static_cast<std::size_t>(comm->rank());
    // This rank's shard, and the description the ranks share.
    const CheckpointState held = state_of(model, cuts[r], cuts[r + 1]);
    const ShardData mine{cuts[r], {held.params, held.first, held.second}};
    CheckpointState meta = state_of(model, 0, 0);
    meta.is_shard = true;
    CheckpointState whole;
    if (comm->rank() == 0) whole = state_of(model, 0, n);
    // Nodes: distinct host names.
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const auto hosts = comm->gather_bytes(host, sizeof host, 0);
    std::set<std::string> distinct;
    for (const auto& h : hosts) distinct.insert(reinterpret_cast<const char*>(h.data()));

    std::vector<double> serial, parallel;
    std::optional<TrustedFolder> parallel_folder;  // each rank's, held from the first save on as a run holds it
    for (int i = 0; i < repeats; ++i) {
      meta.counters.step = whole.counters.step = static_cast<std::uint64_t>(i + 1);
      comm->barrier();
      auto t0 = Clock::now();
      if (comm->rank() == 0) save_checkpoint(dir + "/serial", whole, {1, 0});
      comm->barrier();
      serial.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      save_checkpoint_parallel(*comm, parallel_folder, dir + "/parallel", meta, mine, {1, 0});
      comm->barrier();
      parallel.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (comm->rank() == 0) {
      const double bytes = 3.0 * static_cast<double>(n) * sizeof(float);
      std::cout << fmt::format(
          "ranks {}\nnodes {}\nMB {:.1f}\nserial_s {:.4f}\nparallel_s {:.4f}\nserial_MBps {:.1f}\n"
          "parallel_MBps {:.1f}\n",
          comm->size(), distinct.size(), bytes / 1e6, median(serial), median(parallel), bytes / 1e6 / median(serial),
          bytes / 1e6 / median(parallel));
    }
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_parallel: " << e.what() << "\n";
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
