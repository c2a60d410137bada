#include "launcher/folder_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "launcher/user_name.h"

namespace slurm_train {

std::optional<std::string> folder_trust_problem(const std::string& what, uid_t owner, mode_t mode, uid_t me) {
  if (owner != me && owner != 0)
    return fmt::format(
        "{} belongs to {}, not to this job's user ({}): they could change what the job reads there. "
        "Use a folder of your own",
        what, describe_user(owner), describe_user(me));
  if (mode & S_IWOTH)
    return fmt::format(
        "{} can be written by every user (mode {:04o}): anyone could plant or replace what the job "
        "reads there. Use a folder of your own, or chmod o-w it",
        what, mode & 07777);
  return std::nullopt;
}

void require_trusted_folder(const std::string& what, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("cannot look at {}: {}", what, std::strerror(errno)));
  if (const auto problem = folder_trust_problem(what, st.st_uid, st.st_mode, ::getuid()))
    throw UntrustedFolder(*problem);
}

}  // namespace slurm_train
