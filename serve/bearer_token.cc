#include "serve/bearer_token.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

namespace {

constexpr std::size_t kMostTokenBytes = 4096;

}  // namespace

std::string read_token_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(fmt::format("--token-file {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("--token-file {}: {}", path, std::strerror(e)));
  }
  const auto refuse = [&](const std::string& why) {
    ::close(fd);
    throw std::runtime_error(fmt::format("--token-file {}: {}", path, why));
  };
  if (!S_ISREG(st.st_mode)) refuse("not a regular file");
  if (st.st_uid != ::geteuid())
    refuse(fmt::format("owned by uid {}, not by the user serve runs as (uid {})", st.st_uid, ::geteuid()));
  if ((st.st_mode & 077) != 0)
    refuse(
        fmt::format("mode {:04o} lets other users read or change it; it must be readable by its owner alone "
                    "(chmod 600 {})",
                    st.st_mode & 07777, path));
  std::string text(kMostTokenBytes + 2, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  text = text.substr(0, text.find('\n'));
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.back())) text.pop_back();
  std::size_t first = 0;
  while (first < text.size() && blank(text[first])) ++first;
  text.erase(0, first);
  if (text.empty()) throw std::runtime_error(fmt::format("--token-file {}: its first line is empty", path));
  if (text.size() > kMostTokenBytes)
    throw std::runtime_error(fmt::format("--token-file {}: the token is over {} bytes", path, kMostTokenBytes));
  for (char c : text)
    if (c < 0x21 || c > 0x7e)
      throw std::runtime_error(
          fmt::format("--token-file {}: the token holds a byte 0x{:02x}; expected visible ASCII characters (no blanks)",
                      path, static_cast<unsigned char>(c)));
  return text;
}

TokenFile make_token_file(const std::string& folder, const std::string& name) {
  const auto fail = [](const std::string& what, const std::string& path, int e) {
    return std::runtime_error(fmt::format("cannot {} '{}' for serve's bearer token: {}", what, path, std::strerror(e)));
  };
  // The folder and its parent (~/.slurm-train/serve): made private where missing.
  const std::string parent = folder.substr(0, folder.find_last_of('/'));
  for (const std::string& dir : {parent, folder})
    if (!dir.empty() && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw fail("create the folder", dir, errno);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) throw fail("open the folder", folder, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } close_dir{dir};
  struct stat st {};
  if (::fstat(dir, &st) != 0) throw fail("look at the folder", folder, errno);
  if (st.st_uid != ::geteuid())
    throw std::runtime_error(
        fmt::format("the folder '{}' for serve's bearer token is owned by uid {}, not by the user "
                    "serve runs as (uid {}); use --token-file",
                    folder, st.st_uid, ::geteuid()));
  if ((st.st_mode & 077) != 0)
    throw std::runtime_error(
        fmt::format("the folder '{}' for serve's bearer token has mode {:04o}: other users could "
                    "read the token; chmod 700 it, or use --token-file",
                    folder, st.st_mode & 07777));
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("cannot draw random bytes for serve's bearer token");
  TokenFile t;
  for (unsigned char b : bytes) t.token += fmt::format("{:02x}", b);
  t.path = folder + "/" + name;
  const int fd = ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw fail("create the file", t.path, errno);
  const std::string line = t.token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int e = errno;
  ::close(fd);
  if (!written) {
    ::unlinkat(dir, name.c_str(), 0);
    throw fail("write", t.path, e);
  }
  return t;
}

bool bearer_token_matches(std::string_view header, std::string_view token) {
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() != kScheme.size() + token.size() || header.substr(0, kScheme.size()) != kScheme) return false;
  return CRYPTO_memcmp(header.data() + kScheme.size(), token.data(), token.size()) == 0;
}

}  // namespace slurm_train
