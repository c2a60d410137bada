// Random bytes from the kernel (getrandom(2)): the control plane's secrets and challenges, and
// the names of temporary files that no one can foresee.
#pragma once

#include <cstddef>

namespace slurm_train {

// `n` random bytes. Throws std::runtime_error when it cannot.
void random_bytes(unsigned char* out, std::size_t n);

}  // namespace slurm_train
