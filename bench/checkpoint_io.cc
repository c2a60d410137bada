// checkpoint_io DIR MB [REPEATS]: write and read bandwidth of real checkpoints (the HDF5 image,
// CRC-32 of every dataset, write + fsync + rename + folder fsync + latest; read with every
// checksum verified) of about MB megabytes in DIR. Reads are cold: the file's pages are dropped
// from the page cache first (posix_fadvise DONTNEED, clean after the fsync), as the dd peer in
// bench/checkpoint.sh does with iflag=nocache. Prints "key value" lines; the median of REPEATS.
// read_MBps is the read a resume makes: into the run's buffers, which exist already
// (checkpoint_resume.cc); fresh_read_MBps the same into new buffers (no command reads a whole
// checkpoint so: the floor a VM's new memory sets); model_read_MBps what `sample` and `serve`
// read of a checkpoint (the model's third into new buffers, every other dataset's checksum
// checked), over the whole file's bytes; verify_MBps `ckpt verify` of the file, cold too.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/io/contained_reads.h"

using namespace slurm_train;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void drop_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  // As slurm-train does: the reads' first pass in a fresh process of this program.
  if (const auto child = contained_reads_main(argc, argv)) return *child;
  if (argc < 3) {
    std::cerr << "usage: checkpoint_io DIR MB [REPEATS]\n";
    return 2;
  }
  const std::string dir = argv[1];
  const double mb = std::atof(argv[2]);
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;

  // An MLP whose parameters and two AdamW moments make about `mb` MB: 784 -> H -> H -> 10, H a
  // multiple of 128 as models' widths are (for their matrix products' tiles).
  const double floats = mb * 1e6 / 4 / 3;
  const int hidden = std::max(128, static_cast<int>((-794 + std::sqrt(794.0 * 794 + 4 * floats)) / 2 + 64) / 128 * 128);
  CheckpointState s;
  s.model = mlp_model_layout(mlp_layout(MlpShape{784, {hidden, hidden}, 10}));
  const std::size_t n = s.model.parameters();
  s.params.resize(n);
  s.first.resize(n);
  s.second.resize(n);
  std::uint32_t x = 12345;  // not zeros: no file system may shortcut the data
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s.params[i] = static_cast<float>(x >> 8) * 1e-7f;
    s.first[i] = s.params[i] * 0.5f;
    s.second[i] = s.params[i] * 0.25f;
  }
  s.optimizer = "adamw";
  s.counters.global_batch = 256;
  s.counters.world_size = 1;
  s.config_toml = "[bench]\n";
  s.program_version = SLURM_TRAIN_VERSION;
  s.created = "bench";
  s.host = "bench";

  // Reads: into fresh buffers (the kernel zeroes and faults in the new pages, and the vectors
  // are zeroed again) and into buffers that exist already (the same state object each time, as
  // a resume reads into the model's and optimizer's buffers).
  std::vector<double> write_s, fresh_s, model_s, read_s;
  CheckpointState back;
  std::uintmax_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    s.counters.step = static_cast<std::uint64_t>(r + 1);
    auto t0 = Clock::now();
    const std::string path = save_checkpoint(dir, s, {1, 0});
    write_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    bytes = std::filesystem::file_size(path);
    drop_from_page_cache(path);
    t0 = Clock::now();
    {
      const CheckpointState fresh = read_checkpoint_file(path);
      fresh_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    drop_from_page_cache(path);
    t0 = Clock::now();
    {
      const CheckpointState model = read_checkpoint_model(path);
      model_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (back.params.empty()) read_checkpoint_file(path, back);  // the buffers exist from here on
    drop_from_page_cache(path);
    t0 = Clock::now();
    read_checkpoint_file(path, back);
    read_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (back.params != s.params || back.second != s.second) {
      std::cerr << "checkpoint_io: the checkpoint read back differs\n";
      return 1;
    }
  }
  // `ckpt verify`, cold as the reads: every dataset's CRC-32, then the structure.
  const std::string newest = dir + "/" + fmt::format("step-{:08}.h5", repeats);
  drop_from_page_cache(newest);
  const auto t0 = Clock::now();
  if (!verify_checkpoint_file(newest).empty()) {
    std::cerr << "checkpoint_io: ckpt verify finds the checkpoint invalid\n";
    return 1;
  }
  const double verify_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << fmt::format(
      "file_bytes {}\nparameters {}\nwrite_s {:.4f}\nread_s {:.4f}\nwrite_MBps {:.0f}\nread_MBps {:.0f}\n"
      "fresh_read_MBps {:.0f}\nmodel_read_MBps {:.0f}\nverify_MBps {:.0f}\n",
      bytes, n, median(write_s), median(read_s), bytes / median(write_s) / 1e6, bytes / median(read_s) / 1e6,
      bytes / median(fresh_s) / 1e6, bytes / median(model_s) / 1e6, bytes / verify_s / 1e6);
  std::filesystem::remove_all(dir);
  return 0;
}
