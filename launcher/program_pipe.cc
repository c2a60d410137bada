#include "launcher/program_pipe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "launcher/private_folder.h"
#include "launcher/program_message.h"

namespace slurm_train {

ProgramPipe::ProgramPipe(const std::string& prefix) {
  folder_ = make_private_folder(prefix, "the program's pipe");
  path_ = folder_ + "/pipe";
  if (::mkfifo(path_.c_str(), 0600) != 0 ||
      (fd_ = ::open(path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)) < 0) {
    const int err = errno;
    remove();
    throw std::runtime_error(fmt::format("cannot create the program's pipe '{}': {}", path_, std::strerror(err)));
  }
}

ProgramPipe::~ProgramPipe() {
  if (fd_ >= 0) ::close(fd_);
  remove();
}

void ProgramPipe::remove() noexcept {
  ::unlink(path_.c_str());
  ::rmdir(folder_.c_str());
}

void ProgramPipe::read_lines(const std::function<void(std::string_view)>& line,
                             const std::function<void(std::size_t)>& too_long) {
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: all read
    std::string_view chunk(buffer, static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      const std::size_t newline = chunk.find('\n');
      const std::string_view part = chunk.substr(0, newline);
      if (skipping_) {
        skipped_ += part.size();
      } else if (partial_.size() + part.size() > kMaxProgramLine) {
        skipping_ = true;
        skipped_ = partial_.size() + part.size();
        partial_.clear();
      } else {
        partial_.append(part);
      }
      if (newline == std::string_view::npos) break;
      if (skipping_)
        too_long(skipped_);
      else
        line(partial_);
      partial_.clear();
      skipping_ = false;
      skipped_ = 0;
      chunk.remove_prefix(newline + 1);
    }
  }
}

}  // namespace slurm_train
