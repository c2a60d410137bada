// Bytes of memory bound for places in one file, and how they are written: the plan of a write
// in rounds (pure), and the write by one process (POSIX). A write by all ranks together is the
// Comm's (comm.h: collective MPI-IO).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slurm_train {

struct FileBlock {
  std::uint64_t offset = 0;  // in the file
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// `blocks` sorted by offset and cut into rounds of at most `round_bytes` each (a block may span
// rounds); no empty round, no empty block. Throws std::invalid_argument when two blocks overlap
// or round_bytes is 0. Pure.
std::vector<std::vector<FileBlock>> file_write_rounds(std::vector<FileBlock> blocks, std::size_t round_bytes);

// Writes `blocks` into the existing file `path` round by round, pausing `pause_ms` after each (a
// testing aid), then fsyncs it. Throws std::system_error naming the call and the path.
void write_file_blocks(const std::string& path, const std::vector<FileBlock>& blocks, std::size_t round_bytes,
                       unsigned pause_ms);

}  // namespace slurm_train
