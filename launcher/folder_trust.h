// Whether a folder that holds a job's state (its checkpoints and their owner record, its rank
// logs and restart record) is the job's user's alone to change: another user who can write
// there could plant a checkpoint the job resumes from, forge or remove the records that decide a
// requeue, or swap a log for a link. Trusted: owned by this user or root, and not writable by
// every user (a group-writable folder trusts its group: the user's choice).
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace slurm_train {

struct UntrustedFolder : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Pure: the reason a folder with this owner and mode is not trusted by `me`; nullopt when it is.
// `what` names it ("the checkpoint folder '...'").
std::optional<std::string> folder_trust_problem(const std::string& what, uid_t owner, mode_t mode, uid_t me);

// Throws UntrustedFolder with folder_trust_problem's reason for the folder at `path` (followed if
// it is a link); std::runtime_error when it cannot be looked at.
void require_trusted_folder(const std::string& what, const std::string& path);

}  // namespace slurm_train
