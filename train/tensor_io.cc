#include "train/tensor_io.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "train/crc32.h"

namespace slurm_train {

std::vector<std::uint32_t> write_tensor_pieces(const std::string& path, const std::vector<TensorPiece>& pieces,
                                               unsigned slow_ms) {
  auto checksums = std::async(std::launch::async, [&pieces] {
    std::vector<std::uint32_t> crcs;
    for (const auto& piece : pieces) crcs.push_back(crc32_update(0, piece.data, piece.bytes));
    return crcs;
  });
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    checksums.wait();
    throw std::system_error(err, std::generic_category(), "open");
  }
  // 8 MiB calls: the kernel starts writing back while later pieces are copied (64 MiB calls
  // measured 2-3x slower here, throttled by dirty-page balancing).
  const std::size_t most = slow_ms > 0 ? std::size_t{64} << 10 : std::size_t{8} << 20;
  int err = 0;
  const char* call = "pwrite";
  for (const auto& piece : pieces) {
    const auto* data = static_cast<const unsigned char*>(piece.data);
    for (std::size_t done = 0; done < piece.bytes && err == 0;) {
      const ssize_t n = ::pwrite(fd, data + done, std::min(most, piece.bytes - done), static_cast<off_t>(piece.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : ENOSPC;
        break;
      }
      // Start writing these pages back now, while the next ones are copied, rather than all at
      // the fsync; advice only (the fsync that makes the file durable reports errors).
      ::sync_file_range(fd, static_cast<off_t>(piece.offset + done), n, SYNC_FILE_RANGE_WRITE);
      done += static_cast<std::size_t>(n);
      if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    }
    if (err != 0) break;
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    call = "close";
  }
  std::vector<std::uint32_t> crcs = checksums.get();
  if (err != 0) throw std::system_error(err, std::generic_category(), call);
  return crcs;
}

std::uint32_t pread_with_crc(int fd, std::uint64_t offset, unsigned char* into, std::size_t bytes) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::uint32_t crc = 0;
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kPiece, bytes - done);
    for (std::size_t got = 0; got < n;) {
      const ssize_t r = ::pread(fd, into + done + got, n - got, static_cast<off_t>(offset + done + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::system_error(errno, std::generic_category(), "pread");
      if (r == 0) throw std::runtime_error("the file ends inside its data");
      got += static_cast<std::size_t>(r);
    }
    crc = crc32_update(crc, into + done, n);
    done += n;
  }
  return crc;
}

void require_free_space(const std::string& path, std::size_t bytes) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct statvfs st {};
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &st) != 0) return;
  const auto available = static_cast<std::uintmax_t>(st.f_bavail) * st.f_frsize;
  if (available < bytes)
    throw std::system_error(ENOSPC, std::generic_category(),
                            fmt::format("{} bytes needed, {} available", bytes, available));
}

}  // namespace slurm_train
