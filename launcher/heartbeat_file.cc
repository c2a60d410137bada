#include "launcher/heartbeat_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "spank/jobenv/text.h"

namespace slurm_train {

std::optional<std::uint64_t> parse_heartbeat_step(std::string_view text) {
  text = trim(text);
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return step;
}

HeartbeatFile::HeartbeatFile(const std::string& prefix) {
  std::string folder = prefix + "XXXXXX";
  if (!::mkdtemp(folder.data()))
    throw std::runtime_error(
        fmt::format("cannot create a folder for the heartbeat file, '{}': {}", folder, std::strerror(errno)));
  folder_ = folder;
  path_ = folder_ + "/heartbeat";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int err = errno;
    ::rmdir(folder_.c_str());
    throw std::runtime_error(fmt::format("cannot create the heartbeat file '{}': {}", path_, std::strerror(err)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  mtime_ = st.st_mtim;
  ::close(fd);
}

void HeartbeatFile::remove() noexcept {
  ::unlink(path_.c_str());
  ::rmdir(folder_.c_str());
}

bool HeartbeatFile::changed() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;
  if (st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec && st.st_size == size_) return false;
  mtime_ = st.st_mtim;
  size_ = st.st_size;
  char text[64];
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::pread(fd, text, sizeof text, 0);
    ::close(fd);
    // A write caught half-way reads as no number: the step stays what it was.
    if (n > 0)
      if (const auto step = parse_heartbeat_step(std::string_view(text, static_cast<std::size_t>(n)))) step_ = step;
  }
  return true;
}

}  // namespace slurm_train
