#include "train/io/durable_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "spank/jobenv/host.h"
#include "train/io/write_all.h"

namespace slurm_train {

namespace {

[[noreturn]] void fail(const char* call, const std::string& path, int err) {
  throw std::runtime_error(fmt::format("{} '{}': {}", call, path, std::strerror(err)));
}

}  // namespace

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string temporary_path_for(const std::string& path) {
  return fmt::format("{}.tmp-{}-{}", path, host_name(), ::getpid());
}

std::optional<TemporaryWriter> temporary_writer(const std::string& name, const std::string& final_name) {
  const std::string prefix = final_name + ".tmp-";
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const auto dash = rest.rfind('-');
  if (dash == std::string::npos || dash == 0) return std::nullopt;
  TemporaryWriter writer{rest.substr(0, dash), 0};
  const char* begin = rest.data() + dash + 1;
  const char* end = rest.data() + rest.size();
  const auto [last, ec] = std::from_chars(begin, end, writer.pid);
  if (begin == end || ec != std::errc() || last != end || writer.pid <= 0) return std::nullopt;
  return writer;
}

bool temporary_is_removable(const TemporaryWriter& writer) {
  if (writer.host != host_name()) return false;
  return writer.pid == ::getpid() || !process_alive(writer.pid);
}

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("cannot fsync", path, err);
}

namespace {

void fsync_folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open the folder", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("cannot fsync the folder", dir, err);
}

}  // namespace

void write_file_durably(const std::string& path, const std::function<void(const std::string& temporary)>& write) {
  const std::string tmp = temporary_path_for(path);
  try {
    write(tmp);
    fsync_file(tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename over", path, errno);
  } catch (...) {
    ::unlink(tmp.c_str());  // a partial file only wastes space: it is never read
    throw;
  }
  fsync_folder_of(path);
}

void write_file_durably(const std::string& path, const std::string& text) {
  write_file_durably(path, [&](const std::string& tmp) {
    // Not through a link another user left at the name (a shared textfile-collector folder).
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) fail("cannot create", tmp, errno);
    if (write_all(fd, text) < text.size()) {
      const int err = errno;
      ::close(fd);
      fail("cannot write", tmp, err);
    }
    if (::close(fd) != 0) fail("cannot close", tmp, errno);
  });
}

}  // namespace slurm_train
