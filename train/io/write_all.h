// write(2) until every byte is written: a write may be cut short (a pipe, a signal) and is then
// continued, and EINTR retried.
#pragma once

#include <cstddef>
#include <string_view>

namespace slurm_train {

// Writes `bytes` to `fd`. Returns how many were written: all of them, or fewer when a write
// failed, errno then saying why (ENOSPC where a write wrote nothing without an error).
std::size_t write_all(int fd, std::string_view bytes);

}  // namespace slurm_train
