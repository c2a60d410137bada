#include "train/io/folder_trust.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include "train/io/user_name.h"

namespace slurm_train {

namespace {

bool trusted_owner(uid_t owner, uid_t me) { return owner == me || owner == 0; }

}  // namespace

std::optional<std::string> folder_trust_problem(const std::string& what, uid_t owner, mode_t mode, uid_t me) {
  if (!trusted_owner(owner, me))
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

std::optional<std::string> folder_on_the_way_problem(const std::string& what, const PathEntry& folder, uid_t me) {
  if (!trusted_owner(folder.owner, me))
    return fmt::format(
        "{}: the folder '{}' on its way belongs to {}, neither to this job's user ({}) nor to root: they "
        "could put another folder in its place. Use a folder whose parents are yours or root's",
        what, folder.path, describe_user(folder.owner), describe_user(me));
  if ((folder.mode & S_IWOTH) && !(folder.mode & S_ISVTX))
    return fmt::format(
        "{}: the folder '{}' on its way can be written by every user and is not sticky (mode {:04o}): "
        "anyone could put another folder or a link in its place. Use another folder, or chmod o-w (or +t) it",
        what, folder.path, folder.mode & 07777);
  return std::nullopt;
}

std::optional<std::string> link_trust_problem(const std::string& what, const PathEntry& link, const std::string& target,
                                              const PathEntry& holder, uid_t me) {
  if (!(holder.mode & S_IWOTH)) return std::nullopt;
  if ((holder.mode & S_ISVTX) && trusted_owner(link.owner, me)) return std::nullopt;
  return fmt::format(
      "{}: '{}' is a link (to '{}') that {} made in '{}', a folder every user can write (mode {:04o}): "
      "they could point it elsewhere while the job runs. Give the folder it points to instead, or "
      "a folder of your own",
      what, link.path, target, describe_user(link.owner), holder.path, holder.mode & 07777);
}

}  // namespace slurm_train
