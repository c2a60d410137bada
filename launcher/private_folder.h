// A folder of a task's own for the files its program and supervisor share (the heartbeat file,
// the program's pipe): `prefix` followed by six random characters, made by mkdtemp with mode
// 0700, so that no other user can foresee its name, make it first, or see into it.
#pragma once

#include <string>
#include <string_view>

namespace slurm_train {

// The new folder's path. Throws std::runtime_error naming it and `what` it is for.
std::string make_private_folder(const std::string& prefix, std::string_view what);

}  // namespace slurm_train
