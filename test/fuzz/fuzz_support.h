// What every fuzz target shares: the input written to a file, for the readers that take a path,
// and the rule for what a reader may do with bad input. Any std::exception is a clean rejection
// (each reader documents its own error type; the targets do not re-check which); a crash, a
// leak, undefined behaviour, an allocation above -malloc_limit_mb or an abort() of a target's
// own invariant check is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "train/io/crash_contained.h"
#include "train/io/memory_budget.h"

namespace slurm_train::fuzz {

// The memory the readers are told they may use: half of -malloc_limit_mb, so that a size an
// input names is refused by the reader's own check (a clean rejection) before it could reach
// libFuzzer's limit (a finding), whatever the machine running the fuzzer has free.
inline const MemoryFacts kMemory{512ull << 20, 0, 0, 0, 0};

// The HDF5 readers' time limit in their child process (crash_contained.h), set by the targets
// that read HDF5: a file that hangs libhdf5 must be refused well inside libFuzzer's -timeout
// (10 s in `make fuzz`), three contained reads an input included.
inline void limit_contained_reads() { set_base_time_limit_to_read(std::chrono::milliseconds{2000}); }

// One file per process, rewritten for every input: in /dev/shm when there is one (no disk I/O
// per run), else in TMPDIR or /tmp. Removed when the process ends normally. Its name has the
// same length in every run (not a pid's): error messages quote it, and a name of another length
// would change the coverage a message counts, and so which inputs a seeded run keeps.
class InputFile {
 public:
  explicit InputFile(const char* suffix) {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR");
    path_ = std::string(dir ? dir : "/tmp") + "/slurm-train-fuzz-XXXXXX" + suffix;
    const int fd = mkstemps(path_.data(), static_cast<int>(std::string(suffix).size()));
    if (fd < 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    close(fd);
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with the input; aborts when it cannot (no finding is possible).
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `call`; a std::exception is a clean rejection.
template <typename F>
void rejecting_cleanly(F&& call) {
  try {
    call();
  } catch (const std::exception&) {
  }
}

}  // namespace slurm_train::fuzz
