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
#include "train/io/random_bytes.h"
#include "train/io/write_all.h"

namespace slurm_train {

namespace {

[[noreturn]] void fail(const char* call, const std::string& path, int err) {
  throw std::runtime_error(fmt::format("{} '{}': {}", call, path, std::strerror(err)));
}

std::string in_folder(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

constexpr std::size_t kRandomCharacters = 8;

// The folder of `path`, opened for the replacement of its file.
struct ParentFolder {
  std::string dir, name;
  int fd = -1;
  explicit ParentFolder(const std::string& path) {
    const std::filesystem::path p(path);
    dir = p.parent_path().string();
    name = p.filename().string();
    if (name.empty() || name == "." || name == "..") fail("cannot replace", path, EISDIR);
    fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("cannot open the folder", dir.empty() ? "." : dir, errno);
  }
  ~ParentFolder() { ::close(fd); }
  ParentFolder(const ParentFolder&) = delete;
  ParentFolder& operator=(const ParentFolder&) = delete;
};

}  // namespace

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string temporary_name_for(const std::string& name) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[kRandomCharacters];
  random_bytes(bytes, sizeof bytes);
  std::string suffix;
  for (unsigned char b : bytes) suffix += kAlphabet[b % (sizeof kAlphabet - 1)];
  return fmt::format("{}.tmp-{}-{}.{}", name, host_name(), ::getpid(), suffix);
}

std::optional<TemporaryWriter> temporary_writer(const std::string& name, const std::string& final_name) {
  const std::string prefix = final_name + ".tmp-";
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const auto dash = rest.rfind('-');
  if (dash == std::string::npos || dash == 0) return std::nullopt;
  TemporaryWriter writer{rest.substr(0, dash), 0};
  std::string_view pid(rest);
  pid.remove_prefix(dash + 1);
  // <pid>.<random>: the random part is letters and digits, of its length.
  if (const auto dot = pid.find('.'); dot != std::string_view::npos) {
    const std::string_view random = pid.substr(dot + 1);
    if (random.size() != kRandomCharacters) return std::nullopt;
    for (char c : random)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return std::nullopt;
    pid = pid.substr(0, dot);
  }
  const auto [last, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), writer.pid);
  if (pid.empty() || ec != std::errc() || last != pid.data() + pid.size() || writer.pid <= 0) return std::nullopt;
  return writer;
}

bool temporary_is_removable(const TemporaryWriter& writer) {
  if (writer.host != host_name()) return false;
  return writer.pid == ::getpid() || !process_alive(writer.pid);
}

std::string create_temporary_at(int dirfd, const std::string& dir, const std::string& name) {
  const std::string tmp = temporary_name_for(name);
  const int fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", in_folder(dir, tmp), errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    fail("cannot close", in_folder(dir, tmp), err);
  }
  return tmp;
}

namespace {

// Renames TEMPORARY over NAME; with `sync`, the file is fsynced first and the folder after.
void commit_at(int dirfd, const std::string& dir, const std::string& temporary, const std::string& name, bool sync) {
  if (sync) {
    const std::string shown = in_folder(dir, temporary);
    const int fd = ::openat(dirfd, temporary.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail("cannot open", shown, errno);
    // One descriptor's fsync flushes the file's data, whoever wrote it (HDF5 through its own).
    const int synced = ::fsync(fd);
    const int err = errno;
    ::close(fd);  // read-only: its close reports nothing the fsync has not
    if (synced != 0) fail("cannot fsync", shown, err);
  }
  if (::renameat(dirfd, temporary.c_str(), dirfd, name.c_str()) != 0)
    fail("cannot rename over", in_folder(dir, name), errno);
  if (sync && ::fsync(dirfd) != 0) fail("cannot fsync the folder", dir.empty() ? "." : dir, errno);
}

void replace_at(int dirfd, const std::string& dir, const std::string& name,
                const std::function<void(const FilePath&)>& write, bool sync) {
  const std::string tmp = create_temporary_at(dirfd, dir, name);
  try {
    write(FilePath(fmt::format("/proc/self/fd/{}/{}", dirfd, tmp), in_folder(dir, tmp)));
    commit_at(dirfd, dir, tmp, name, sync);
  } catch (...) {
    ::unlinkat(dirfd, tmp.c_str(), 0);  // a partial file only wastes space: it is never read
    throw;
  }
}

void write_text(const FilePath& temporary, const std::string& text) {
  const int fd = ::open(temporary.path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("cannot open", temporary.shown, errno);
  if (write_all(fd, text) < text.size()) {
    const int err = errno;
    ::close(fd);
    fail("cannot write", temporary.shown, err);
  }
  if (::close(fd) != 0) fail("cannot close", temporary.shown, errno);
}

}  // namespace

void commit_temporary_at(int dirfd, const std::string& dir, const std::string& temporary, const std::string& name) {
  commit_at(dirfd, dir, temporary, name, true);
}

void write_file_durably_at(int dirfd, const std::string& dir, const std::string& name,
                           const std::function<void(const FilePath&)>& write) {
  replace_at(dirfd, dir, name, write, true);
}

void write_file_durably_at(int dirfd, const std::string& dir, const std::string& name, const std::string& text) {
  replace_at(
      dirfd, dir, name, [&](const FilePath& temporary) { write_text(temporary, text); }, true);
}

void replace_file_at(int dirfd, const std::string& dir, const std::string& name, const std::string& text) {
  replace_at(
      dirfd, dir, name, [&](const FilePath& temporary) { write_text(temporary, text); }, false);
}

void write_file_durably(const std::string& path, const std::function<void(const FilePath&)>& write) {
  const ParentFolder folder(path);
  write_file_durably_at(folder.fd, folder.dir, folder.name, write);
}

void write_file_durably(const std::string& path, const std::string& text) {
  const ParentFolder folder(path);
  write_file_durably_at(folder.fd, folder.dir, folder.name, text);
}

}  // namespace slurm_train
