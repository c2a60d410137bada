#include "train/io/random_bytes.h"

#include <sys/random.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

void random_bytes(unsigned char* out, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::getrandom(out + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw std::runtime_error(fmt::format("getrandom: {}", std::strerror(errno)));
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace slurm_train
