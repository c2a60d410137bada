#include "train/io/user_name.h"

#include <pwd.h>

#include <fmt/format.h>

namespace slurm_train {

std::string describe_user(uid_t uid) {
  passwd pw{}, *found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &pw, buffer, sizeof buffer, &found) == 0 && found)
    return fmt::format("uid {} ({})", uid, pw.pw_name);
  return fmt::format("uid {}", uid);
}

}  // namespace slurm_train
