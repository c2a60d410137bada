#include "train/io/span_checksums.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "train/io/crc32.h"

namespace slurm_train {

namespace {

std::uint64_t size_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::system_error(errno, std::generic_category(), "stat");
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace

std::size_t span_for_file(std::uint64_t file_bytes) {
  constexpr std::uint64_t kMostSpans = std::uint64_t{1} << 20;
  constexpr std::size_t kLargest = std::size_t{4} << 20;
  std::size_t span = 4096;
  while (file_bytes / span > kMostSpans && span < kLargest) span *= 2;
  return span;
}

SpanChecksums::SpanChecksums(const std::string& path)
    : reader_(path), file_bytes_(size_of(path)), span_(span_for_file(file_bytes_)) {
  crcs_ = reader_.span_checksums(file_bytes_, span_);
}

std::uint32_t SpanChecksums::range(std::uint64_t offset, std::uint64_t bytes) {
  if (offset > file_bytes_ || bytes > file_bytes_ - offset)
    throw std::runtime_error(fmt::format("the file ends inside its data (bytes {} to {} of a file of {})", offset,
                                         offset + bytes, file_bytes_));
  const std::uint64_t end = offset + bytes;
  const std::uint64_t first_whole = std::min((offset + span_ - 1) / span_ * span_, end);
  const std::uint64_t last_whole = std::max(end / span_ * span_, first_whole);
  std::uint32_t crc = first_whole > offset ? reader_.read(offset, first_whole - offset, nullptr) : 0;
  crc = crc32_combine_spans(crc, crcs_.data() + first_whole / span_, (last_whole - first_whole) / span_, span_);
  if (end > last_whole)
    crc = crc32_combine_bytes(crc, reader_.read(last_whole, end - last_whole, nullptr), end - last_whole);
  return crc;
}

}  // namespace slurm_train
