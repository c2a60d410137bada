#include "train/io/tensor_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "train/io/crc32.h"
#include "train/io/h5.h"
#include "train/io/huge_pages.h"

namespace slurm_train {

namespace {

// Direct I/O moves whole blocks of this size at offsets and addresses aligned to it; 4096 covers
// the logical block size of disks and the page size that Lustre's and GPFS's O_DIRECT ask for.
constexpr std::size_t kDirectBlock = 4096;
// A tensor of a file that h5::create_file aligns starts on a block: its whole blocks need no staging.
static_assert(h5::kFileAlignment % kDirectBlock == 0);
// One staged write: the largest request virtio-blk and many NVMe drives take whole (4 MiB).
constexpr std::size_t kStageBytes = std::size_t{4} << 20;

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }
std::uint64_t round_down(std::uint64_t v, std::uint64_t to) { return v / to * to; }

// Writes all `n` bytes at `offset`; 0 or the errno of the call that failed (a short write that
// makes no progress is ENOSPC).
int pwrite_all(int fd, const unsigned char* data, std::size_t n, std::uint64_t offset) {
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    done += static_cast<std::size_t>(w);
  }
  return 0;
}

// Direct writes in flight: two kept this VM's disk busier than one (a 256 MB checkpoint, six
// alternated runs: 1133-1241 against 889-1164 MB/s; three gave no more).
constexpr int kWritesInFlight = 2;

// Aligned staging buffers: one filled while the others are being written.
struct Stages {
  HugePageBuffer memory{(kWritesInFlight + 1) * kStageBytes};
  unsigned char* stage(int i) const { return memory.data() + i * kStageBytes; }
};

// The pieces' bytes written through `direct` (opened O_DIRECT) wherever they cover whole aligned
// blocks, the rest of each piece (its first and last partial block, which it may share with HDF5's
// metadata or another piece) through `buffered`. Each block run is copied to a staging buffer and
// written from there while the next is copied and the one before may still be in flight. Returns
// 0 or the errno of the call that failed;
// EINVAL from a direct write (a file system that takes no direct I/O at this alignment) is the
// caller's to retry through the page cache.
int write_pieces_direct(int direct, int buffered, const std::vector<TensorPiece>& pieces) {
  Stages stages;
  if (!stages.memory.data()) return EINVAL;
  std::deque<std::future<int>> in_flight;
  int err = 0, next = 0;
  auto finish_in_flight = [&](std::size_t keep) {
    for (; in_flight.size() > keep; in_flight.pop_front())
      if (const int e = in_flight.front().get(); err == 0) err = e;
  };
  for (const TensorPiece& piece : pieces) {
    const auto* data = static_cast<const unsigned char*>(piece.data);
    const std::uint64_t begin = piece.offset, end = piece.offset + piece.bytes;
    const std::uint64_t first_block = std::min(round_up(begin, kDirectBlock), end);
    const std::uint64_t last_block = std::max(round_down(end, kDirectBlock), first_block);
    if (err == 0) err = pwrite_all(buffered, data, first_block - begin, begin);
    if (err == 0) err = pwrite_all(buffered, data + (last_block - begin), end - last_block, last_block);
    for (std::uint64_t at = first_block; at < last_block && err == 0; at += kStageBytes) {
      const std::size_t n = std::min<std::uint64_t>(kStageBytes, last_block - at);
      unsigned char* stage = stages.stage(next);
      std::memcpy(stage, data + (at - begin), n);
      finish_in_flight(kWritesInFlight - 1);
      in_flight.push_back(std::async(std::launch::async, [=] { return pwrite_all(direct, stage, n, at); }));
      next = (next + 1) % (kWritesInFlight + 1);
    }
  }
  finish_in_flight(0);
  return err;
}

// The pieces through the page cache in 8 MiB calls, writeback started as each is written (64 MiB
// calls measured 2-3x slower here, throttled by dirty-page balancing); slow_ms > 0 writes 64 KiB
// at a time with a pause after each.
int write_pieces_buffered(int fd, const std::vector<TensorPiece>& pieces, unsigned slow_ms) {
  const std::size_t most = slow_ms > 0 ? std::size_t{64} << 10 : std::size_t{8} << 20;
  for (const auto& piece : pieces) {
    const auto* data = static_cast<const unsigned char*>(piece.data);
    for (std::size_t done = 0; done < piece.bytes;) {
      const std::size_t n = std::min(most, piece.bytes - done);
      if (const int err = pwrite_all(fd, data + done, n, piece.offset + done); err != 0) return err;
      // Advice only: the fsync that makes the file durable reports errors.
      ::sync_file_range(fd, static_cast<off_t>(piece.offset + done), static_cast<off_t>(n), SYNC_FILE_RANGE_WRITE);
      done += n;
      if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    }
  }
  return 0;
}

}  // namespace

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
  // Direct I/O where the file system takes it (not every FUSE or tmpfs): fresh page-cache pages
  // cost more than the disk where memory is a VM's that its host takes back while free (a write
  // through the page cache ran at half the speed, see docs/performance.md), and the process that
  // writes a checkpoint does not read it again.
  int err = 0;
  const int direct = slow_ms > 0 ? -1 : ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct >= 0) {
    err = write_pieces_direct(direct, fd, pieces);
    ::close(direct);
    if (err == EINVAL) err = write_pieces_buffered(fd, pieces, 0);
  } else {
    err = write_pieces_buffered(fd, pieces, slow_ms);
  }
  const char* call = "pwrite";
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    call = "close";
  }
  std::vector<std::uint32_t> crcs = checksums.get();
  if (err != 0) throw std::system_error(err, std::generic_category(), call);
  return crcs;
}

namespace {

void pread_all(int fd, std::uint64_t offset, unsigned char* into, std::size_t n) {
  for (std::size_t got = 0; got < n;) {
    const ssize_t r = ::pread(fd, into + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::system_error(errno, std::generic_category(), "pread");
    if (r == 0) throw std::runtime_error("the file ends inside its data");
    got += static_cast<std::size_t>(r);
  }
}

// Direct reads of this many blocks of kStageBytes in flight: one request at a time leaves a
// virtio or NVMe queue mostly idle (a 256 MB read: 300 MB/s with one, 2.5-3 GB/s with four here).
constexpr int kReadsInFlight = 4;

}  // namespace

std::size_t direct_io_memory_alignment(int fd) {
  struct statx st {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 && (st.stx_mask & STATX_DIOALIGN) != 0 &&
      st.stx_dio_mem_align > 0 && st.stx_dio_mem_align <= kDirectBlock)
    return st.stx_dio_mem_align;
  return kDirectBlock;
}

namespace {

// Reads [from, to) of `fd` (opened O_DIRECT; both aligned) into `stage`, as far as the file goes;
// the bytes read, or -errno.
long pread_direct(int fd, unsigned char* stage, std::uint64_t from, std::uint64_t to) {
  std::size_t got = 0;
  while (from + got < to) {
    const ssize_t r = ::pread(fd, stage + got, to - from - got, static_cast<off_t>(from + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
    if (got % kDirectBlock != 0) break;  // a short read ends at the file's end
  }
  return static_cast<long>(got);
}

}  // namespace

TensorReader::TensorReader(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open");
  // Advice only: the buffered reads are front to back.
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  direct_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);  // -1: no direct I/O here
  if (direct_ >= 0) memory_alignment_ = direct_io_memory_alignment(direct_);
}

TensorReader::~TensorReader() {
  if (direct_ >= 0) ::close(direct_);
  ::close(fd_);
}

std::uint32_t TensorReader::read(std::uint64_t offset, std::size_t bytes, unsigned char* into) {
  if (bytes >= kDirectIoFrom && direct_ >= 0) {
    if (!stages_) stages_ = std::make_unique<HugePageBuffer>(kReadsInFlight * kStageBytes);
    if (stages_->data()) return read_direct(offset, bytes, into);
  }
  return read_buffered(offset, bytes, into);
}

std::uint32_t TensorReader::read_buffered(std::uint64_t offset, std::size_t bytes, unsigned char* into) {
  if (into) {
    pread_all(fd_, offset, into, bytes);
    return crc32_update(0, into, bytes);
  }
  std::vector<unsigned char> piece(std::min(bytes, std::size_t{1} << 20));
  std::uint32_t crc = 0;
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(piece.size(), bytes - done);
    pread_all(fd_, offset + done, piece.data(), n);
    crc = crc32_combine_bytes(crc, crc32_update(0, piece.data(), n), n);
    done += n;
  }
  return crc;
}

// The aligned span of the range in blocks of kStageBytes, taken by kReadsInFlight threads in
// turn: each reads a block into its stage, hands the range's part of it to `use` (block index,
// the part, its first and end offset in the file), and takes the next. 0, or the errno of the
// first failure; -1 when the file ends first.
int TensorReader::for_each_direct_block(
    std::uint64_t offset, std::uint64_t bytes, unsigned char* straight_into,
    const std::function<void(std::size_t, const unsigned char*, std::uint64_t, std::uint64_t)>& use) {
  const std::uint64_t begin = round_down(offset, kDirectBlock), end = round_up(offset + bytes, kDirectBlock);
  const std::size_t blocks = (end - begin + kStageBytes - 1) / kStageBytes;
  std::atomic<std::size_t> next{0};
  std::atomic<int> error{0};
  auto work = [&](int k) {
    unsigned char* stage = stages_->data() + static_cast<std::size_t>(k) * kStageBytes;
    for (std::size_t b; error == 0 && (b = next++) < blocks;) {
      const std::uint64_t from = begin + b * kStageBytes, to = std::min<std::uint64_t>(from + kStageBytes, end);
      const std::uint64_t lo = std::max<std::uint64_t>(from, offset), hi = std::min<std::uint64_t>(to, offset + bytes);
      // A block wholly inside the range goes straight to its place in the caller's buffer.
      unsigned char* into =
          straight_into && from >= offset && to <= offset + bytes ? straight_into + (from - offset) : stage;
      const long got = pread_direct(direct_, into, from, to);
      if (got < 0 || static_cast<std::uint64_t>(got) < hi - from) {
        int expected = 0;
        error.compare_exchange_strong(expected, got < 0 ? static_cast<int>(-got) : -1);
        return;
      }
      if (into != stage) bytes_read_straight_.fetch_add(to - from, std::memory_order_relaxed);
      use(b, into + (lo - from), lo, hi);
    }
  };
  std::vector<std::thread> helpers;
  for (int k = 1; k < std::min<int>(kReadsInFlight, static_cast<int>(blocks)); ++k) helpers.emplace_back(work, k);
  work(0);
  for (std::thread& t : helpers) t.join();
  return error;
}

std::uint32_t TensorReader::read_direct(std::uint64_t offset, std::size_t bytes, unsigned char* into) {
  const std::size_t blocks =
      (round_up(offset + bytes, kDirectBlock) - round_down(offset, kDirectBlock) + kStageBytes - 1) / kStageBytes;
  std::vector<std::uint32_t> crcs(blocks);
  std::vector<std::size_t> lengths(blocks);
  const bool aligned_alike = into && (reinterpret_cast<std::uintptr_t>(into) - offset) % memory_alignment_ == 0;
  const int error = for_each_direct_block(
      offset, bytes, aligned_alike ? into : nullptr,
      [&](std::size_t b, const unsigned char* part, std::uint64_t lo, std::uint64_t hi) {
        unsigned char* place = into ? into + (lo - offset) : nullptr;
        crcs[b] = place && place != part ? crc32_copy(0, place, part, hi - lo) : crc32_update(0, part, hi - lo);
        lengths[b] = hi - lo;
      });
  if (error == EINVAL) return read_buffered(offset, bytes, into);  // direct I/O refused at this alignment
  if (error == -1) throw std::runtime_error("the file ends inside its data");
  if (error != 0) throw std::system_error(error, std::generic_category(), "pread");
  std::uint32_t crc = 0;
  for (std::size_t b = 0; b < blocks; ++b) crc = crc32_combine_bytes(crc, crcs[b], lengths[b]);
  return crc;
}

std::vector<std::uint32_t> TensorReader::span_checksums(std::uint64_t bytes, std::size_t span) {
  if (span < kDirectBlock || span > kStageBytes || (span & (span - 1)) != 0)
    throw std::invalid_argument(fmt::format("span_checksums: a span of {} bytes; expected a power of two from {} to {}",
                                            span, kDirectBlock, kStageBytes));
  std::vector<std::uint32_t> crcs((bytes + span - 1) / span);
  const auto spans_of = [&](const unsigned char* part, std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t at = lo; at < hi; at += span)  // lo is a multiple of span: blocks are
      crcs[at / span] = crc32_update(0, part + (at - lo), std::min<std::uint64_t>(span, hi - at));
  };
  if (bytes >= kDirectIoFrom && direct_ >= 0) {
    if (!stages_) stages_ = std::make_unique<HugePageBuffer>(kReadsInFlight * kStageBytes);
    if (stages_->data()) {
      const int error = for_each_direct_block(
          0, bytes, nullptr,
          [&](std::size_t, const unsigned char* part, std::uint64_t lo, std::uint64_t hi) { spans_of(part, lo, hi); });
      if (error == -1) throw std::runtime_error("the file ends inside its data");
      if (error != 0 && error != EINVAL) throw std::system_error(error, std::generic_category(), "pread");
      if (error == 0) return crcs;
    }
  }
  std::vector<unsigned char> piece(std::min<std::uint64_t>(std::max<std::size_t>(span, std::size_t{1} << 20), bytes));
  for (std::uint64_t done = 0; done < bytes;) {
    const std::size_t n = std::min<std::uint64_t>(piece.size(), bytes - done);
    pread_all(fd_, done, piece.data(), n);
    spans_of(piece.data(), done, done + n);
    done += n;
  }
  return crcs;
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
