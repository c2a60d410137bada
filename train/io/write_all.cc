#include "train/io/write_all.h"

#include <unistd.h>

#include <cerrno>

namespace slurm_train {

std::size_t write_all(int fd, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return done;
    if (n == 0) {
      errno = ENOSPC;
      return done;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace slurm_train
