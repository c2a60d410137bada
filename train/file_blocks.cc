#include "train/file_blocks.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace slurm_train {

std::vector<std::vector<FileBlock>> file_write_rounds(std::vector<FileBlock> blocks, std::size_t round_bytes) {
  if (round_bytes == 0) throw std::invalid_argument("file_write_rounds: rounds of 0 bytes");
  std::erase_if(blocks, [](const FileBlock& b) { return b.bytes == 0; });
  std::sort(blocks.begin(), blocks.end(), [](const FileBlock& a, const FileBlock& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < blocks.size(); ++i)
    if (blocks[i - 1].offset + blocks[i - 1].bytes > blocks[i].offset)
      throw std::invalid_argument(fmt::format("file_write_rounds: the blocks at bytes {} ({} bytes) and {} overlap",
                                              blocks[i - 1].offset, blocks[i - 1].bytes, blocks[i].offset));
  std::vector<std::vector<FileBlock>> rounds;
  std::size_t room = 0;
  for (FileBlock b : blocks) {
    while (b.bytes > 0) {
      if (room == 0) {
        rounds.emplace_back();
        room = round_bytes;
      }
      const std::size_t n = std::min(room, b.bytes);
      rounds.back().push_back({b.offset, b.data, n});
      b.offset += n;
      b.data = static_cast<const unsigned char*>(b.data) + n;
      b.bytes -= n;
      room -= n;
    }
  }
  return rounds;
}

void write_file_blocks(const std::string& path, const std::vector<FileBlock>& blocks, std::size_t round_bytes,
                       unsigned pause_ms) {
  auto fail = [&](const char* call) {
    throw std::system_error(errno, std::generic_category(), fmt::format("{} '{}'", call, path));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail("open");
  try {
    for (const auto& round : file_write_rounds(blocks, round_bytes)) {
      for (const FileBlock& b : round) {
        std::size_t done = 0;
        while (done < b.bytes) {
          const ssize_t n = ::pwrite(fd, static_cast<const unsigned char*>(b.data) + done, b.bytes - done,
                                     static_cast<off_t>(b.offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            fail("pwrite");
          }
          done += static_cast<std::size_t>(n);
        }
      }
      if (pause_ms > 0) ::usleep(pause_ms * 1000u);
    }
    if (::fsync(fd) != 0) fail("fsync");
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail("close");
}

}  // namespace slurm_train
