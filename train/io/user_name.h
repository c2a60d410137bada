// A user as messages name it: "uid 1000 (alice)", or "uid 1000" when the name is unknown.
#pragma once

#include <sys/types.h>

#include <string>

namespace slurm_train {

std::string describe_user(uid_t uid);

}  // namespace slurm_train
