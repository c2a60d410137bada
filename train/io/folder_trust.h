// Whether a folder that holds a job's state (its checkpoints and their owner record, its rank
// logs, restart records and step reports, its metrics) is the job's user's alone to change:
// another user who can write there could plant a checkpoint the job resumes from, forge or
// remove the records that decide a requeue, or swap a log for a link; and whoever can change a
// folder or a link on the way to it can put another folder in its place at any time.
//
// The rule, for each entry met on the way from / to the folder (trusted_folder.h walks it):
//   - a folder passed on the way belongs to the user or root, and others cannot write it unless
//     it is sticky: in a sticky folder (/tmp) each user can remove or rename their own entries
//     only;
//   - a symbolic link followed lies in a folder that others cannot write, or, in a sticky folder
//     that others can write, belongs to the user or root. A link's target never changes: only
//     who may replace the entry can repoint it, that is whoever can write its folder, and in a
//     sticky folder the link's owner alone. So a site's /scratch -> /lustre/scratch or
//     /var/run -> /run is followed, and a link another user planted in /tmp is refused;
//   - the folder itself belongs to the user or root, and others cannot write it, sticky or not.
// A group-writable folder trusts its group: the user's choice, allowed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace slurm_train {

struct UntrustedFolder : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An entry met on the way: where (for messages), its owner, and its mode (the type bits, the
// permission bits and the sticky bit, as lstat(2) gives them).
struct PathEntry {
  std::string path;
  uid_t owner = 0;
  mode_t mode = 0;
};

// Pure, each nullopt when trusted, else the reason, which begins with `what` ("the checkpoint
// folder '...'").
// The folder itself, owned by `owner` with `mode`, for the user `me`.
std::optional<std::string> folder_trust_problem(const std::string& what, uid_t owner, mode_t mode, uid_t me);
// A folder passed on the way to it.
std::optional<std::string> folder_on_the_way_problem(const std::string& what, const PathEntry& folder, uid_t me);
// A link to `target` in `holder` (a folder on the way, itself trusted).
std::optional<std::string> link_trust_problem(const std::string& what, const PathEntry& link, const std::string& target,
                                              const PathEntry& holder, uid_t me);

}  // namespace slurm_train
