#include "train/io/trusted_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "train/io/durable_file.h"
#include "train/io/user_name.h"

namespace slurm_train {

namespace {

// As the kernel allows (MAXSYMLINKS), so that a loop of links ends.
constexpr int kMaxLinks = 40;

// A std::system_error, whose code tells a folder that is not there (a node that does not share
// it) from the rest.
[[noreturn]] void fail(const std::string& doing, const char* call, const std::string& path, int err) {
  throw std::system_error(err, std::generic_category(), fmt::format("{}: {} '{}'", doing, call, path));
}

std::string joined(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The names of `path`, in order, without the empty ones and ".".
std::deque<std::string> names_of(const std::string& path) {
  std::deque<std::string> names;
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    std::string name = path.substr(begin, end - begin);
    if (!name.empty() && name != ".") names.push_back(std::move(name));
    begin = end + 1;
  }
  return names;
}

std::string absolute(const std::string& path, const std::string& doing) {
  if (path.starts_with('/')) return path;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) fail(doing, "getcwd for", path, errno);
  return joined(cwd, path);
}

// The folders on the way, each open with O_PATH (search permission is enough), closed at the end.
class Walk {
 public:
  ~Walk() {
    for (const Held& h : held_) ::close(h.fd);
  }
  struct Held {
    int fd;
    PathEntry entry;
  };
  void push(int fd, PathEntry entry) { held_.push_back({fd, std::move(entry)}); }
  Held& top() { return held_.back(); }
  // ".." of / is /.
  void up() {
    if (held_.size() < 2) return;
    ::close(held_.back().fd);
    held_.pop_back();
  }
  void to_root() {
    while (held_.size() > 1) up();
  }

 private:
  std::vector<Held> held_;
};

PathEntry entry_of(int fd, const std::string& path, const std::string& doing) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(doing, "stat", path, errno);
  return {path, st.st_uid, st.st_mode};
}

std::string link_target(int fd, const std::string& path, const std::string& doing) {
  char target[PATH_MAX];
  const ssize_t n = ::readlinkat(fd, "", target, sizeof target);
  if (n < 0) fail(doing, "readlink", path, errno);
  if (static_cast<std::size_t>(n) == sizeof target) fail(doing, "readlink", path, ENAMETOOLONG);
  return std::string(target, static_cast<std::size_t>(n));
}

// The folder at `path` opened for reading (O_RDONLY: its descriptor is fsynced after renames).
int open_trusted(const std::string& what, const std::string& path, bool create) {
  const std::string doing = (create ? "cannot create " : "cannot open ") + what;
  const uid_t me = ::getuid();
  const std::string start = absolute(path, doing);
  Walk walk;
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail(doing, "open", "/", errno);
  walk.push(root, PathEntry{});
  walk.top().entry = entry_of(root, "/", doing);
  std::deque<std::string> rest = names_of(start);
  int links = 0;
  while (!rest.empty()) {
    const std::string name = std::move(rest.front());
    rest.pop_front();
    if (name == "..") {
      walk.up();
      continue;
    }
    const Walk::Held& here = walk.top();
    if (const auto problem = folder_on_the_way_problem(what, here.entry, me)) throw UntrustedFolder(*problem);
    const std::string at = joined(here.entry.path, name);
    int fd = ::openat(here.fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      // Never writable by others, whatever the umask; the group as the umask says.
      if (::mkdirat(here.fd, name.c_str(), 0775) != 0 && errno != EEXIST) fail(doing, "mkdir", at, errno);
      fd = ::openat(here.fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) fail(doing, "open", at, errno);
    PathEntry entry;
    std::string target;
    try {
      entry = entry_of(fd, at, doing);
      if (S_ISLNK(entry.mode)) target = link_target(fd, at, doing);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (S_ISDIR(entry.mode)) {
      walk.push(fd, std::move(entry));
      continue;
    }
    ::close(fd);
    if (!S_ISLNK(entry.mode)) fail(doing, "open", at, ENOTDIR);
    if (const auto problem = link_trust_problem(what, entry, target, here.entry, me)) throw UntrustedFolder(*problem);
    if (++links > kMaxLinks) fail(doing, "follow the links on the way to", start, ELOOP);
    if (target.starts_with('/')) walk.to_root();
    std::deque<std::string> more = names_of(target);
    rest.insert(rest.begin(), more.begin(), more.end());
  }
  const Walk::Held& folder = walk.top();
  if (const auto problem = folder_trust_problem(what, folder.entry.owner, folder.entry.mode, me))
    throw UntrustedFolder(*problem);
  const int fd = ::openat(folder.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(doing, "open", folder.entry.path, errno);
  return fd;
}

}  // namespace

TrustedFolder::TrustedFolder(const std::string& kind, const std::string& path, bool create)
    : path_(path), fd_(open_trusted(fmt::format("{} '{}'", kind, path), path, create)) {}

TrustedFolder::~TrustedFolder() {
  if (fd_ >= 0) ::close(fd_);
}

TrustedFolder::TrustedFolder(TrustedFolder&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

TrustedFolder& TrustedFolder::operator=(TrustedFolder&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::string TrustedFolder::shown(const std::string& name) const { return joined(path_, name); }

FilePath TrustedFolder::file(const std::string& name) const {
  return FilePath(fmt::format("/proc/self/fd/{}/{}", fd_, name), shown(name));
}

int TrustedFolder::create_exclusive(const std::string& name, mode_t mode) const {
  const int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), fmt::format("cannot create '{}'", shown(name)));
  return fd;
}

int TrustedFolder::open_append(const std::string& name, const std::string& kind, mode_t mode) const {
  // O_NONBLOCK: a FIFO in its place would otherwise hold the open until someone reads it.
  const int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot open {} '{}': {}", kind, shown(name), std::strerror(errno)));
  struct stat st {};
  std::optional<std::string> problem;
  const uid_t me = ::getuid();
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot stat {} '{}': {}", kind, shown(name), std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode))
    problem = fmt::format("{} '{}' is not a regular file: remove it, or give another file", kind, shown(name));
  else if (st.st_uid != me)
    problem = fmt::format(
        "{} '{}' belongs to {}, not to this job's user ({}): what it holds is theirs, and the job would add to "
        "it. Move it away, or give another file",
        kind, shown(name), describe_user(st.st_uid), describe_user(me));
  else if (st.st_mode & S_IWOTH)
    problem = fmt::format("{} '{}' can be written by every user (mode {:04o}): anyone could add to it. chmod o-w it",
                          kind, shown(name), st.st_mode & 07777);
  if (problem) {
    ::close(fd);
    throw UntrustedFolder(*problem);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot fcntl {} '{}': {}", kind, shown(name), std::strerror(err)));
  }
  return fd;
}

std::string TrustedFolder::create_temporary(const std::string& name) const {
  return create_temporary_at(fd_, path_, name);
}

void TrustedFolder::commit_temporary(const std::string& temporary, const std::string& name) const {
  commit_temporary_at(fd_, path_, temporary, name);
}

void TrustedFolder::replace(const std::string& name, const std::string& text) const {
  write_file_durably_at(fd_, path_, name, text);
}

void TrustedFolder::replace(const std::string& name, const std::function<void(const FilePath&)>& write) const {
  write_file_durably_at(fd_, path_, name, write);
}

void TrustedFolder::replace_unsynced(const std::string& name, const std::string& text) const {
  replace_file_at(fd_, path_, name, text);
}

std::optional<std::string> TrustedFolder::read(const std::string& name, std::size_t limit) const {
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw std::runtime_error(fmt::format("cannot open '{}': {}", shown(name), std::strerror(errno)));
  }
  std::string text;
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    err = EINVAL;
  } else {
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
      if (text.size() > limit) {
        err = EFBIG;
        break;
      }
    }
  }
  ::close(fd);
  if (err == EINVAL) throw std::runtime_error(fmt::format("'{}' is not a regular file", shown(name)));
  if (err != 0) throw std::runtime_error(fmt::format("cannot read '{}': {}", shown(name), std::strerror(err)));
  return text;
}

bool TrustedFolder::remove(const std::string& name) const {
  if (::unlinkat(fd_, name.c_str(), 0) == 0) return true;
  if (errno == ENOENT) return false;
  throw std::runtime_error(fmt::format("cannot remove '{}': {}", shown(name), std::strerror(errno)));
}

bool TrustedFolder::link(const std::string& from, const std::string& name) const {
  if (::linkat(fd_, from.c_str(), fd_, name.c_str(), 0) == 0) return true;
  if (errno == EEXIST) return false;
  throw std::runtime_error(fmt::format("cannot link '{}' to '{}': {}", shown(from), shown(name), std::strerror(errno)));
}

bool TrustedFolder::rename(const std::string& from, const std::string& name) const {
  if (::renameat(fd_, from.c_str(), fd_, name.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw std::runtime_error(
      fmt::format("cannot rename '{}' to '{}': {}", shown(from), shown(name), std::strerror(errno)));
}

std::vector<std::string> TrustedFolder::names() const {
  // fdopendir takes the descriptor over: a copy of it, whose offset is its own.
  const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot list '{}': {}", path_, std::strerror(errno)));
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot list '{}': {}", path_, std::strerror(err)));
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) throw std::runtime_error(fmt::format("cannot list '{}': {}", path_, std::strerror(err)));
  return names;
}

}  // namespace slurm_train
