// A checkpoint folder belongs to one job at a time. Two runs writing one folder would delete each
// other's temporary files and count each other's starts as restarts without progress, so rank 0
// claims the folder before it reads or writes anything there, and a second run is refused.
//
// The claim is the file <dir>/owner (job, step, host, pid, start time), made by writing a file of
// this process's own name and link()ing it to `owner`: link fails with EEXIST when the name is
// taken, atomically on NFS and Lustre as on local disks, unlike fcntl locks, which some NFS mounts
// (nolock) keep per host and HDF5_USE_FILE_LOCKING=FALSE sites have given up on. The owner removes
// the file when its run ends. An owner record left behind is stale, and taken over with a note,
// when its job is this job (a requeued or restarted run), when it names a process of this host
// that is gone, or when Slurm (squeue) says its job has ended.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "train/io/trusted_folder.h"

namespace slurm_train {

struct CheckpointOwner {
  std::string job;   // the launcher's job id: Slurm's (array: <job>_<task>) or local-<time>-<pid>
  std::string step;  // SLURM_STEP_ID, or ""
  std::string host;
  long pid = 0;
  std::int64_t started = 0;  // unix time
};

std::string format_checkpoint_owner(const CheckpointOwner& owner);
// Throws std::invalid_argument naming the line it cannot read.
CheckpointOwner parse_checkpoint_owner(const std::string& text);
// "job 123 (step 0, host node1, pid 4242, since 2026-12-01T23:50:00Z)"
std::string describe_checkpoint_owner(const CheckpointOwner& owner);

// What is known of the recorded owner: whether its process lives (asked only on its own host)
// and whether Slurm has its job (nullopt: not a Slurm job id, or Slurm could not be asked).
struct OwnerFacts {
  bool process_alive = true;
  std::optional<bool> job_active;
};

// Why the recorded owner is stale ("" when it is not and the folder is still taken).
std::string stale_owner_reason(const CheckpointOwner& recorded, const CheckpointOwner& me, const OwnerFacts& facts);

struct FolderClaim {
  bool granted = false;
  std::string message;  // granted: a note when a stale owner was taken over, or ""; else the refusal
};

// Claims the folder `dir` (open_checkpoint_folder's, train/checkpoint/checkpoint_store.h) for
// `me`, every file made and linked through it. `job_active` asks Slurm about a job id (nullopt:
// cannot tell). Throws std::runtime_error naming the path when the folder cannot be written.
FolderClaim claim_checkpoint_folder(const TrustedFolder& dir, const CheckpointOwner& me,
                                    const std::function<std::optional<bool>(const std::string& job)>& job_active);

// Removes <dir>/owner if it still names `me` (a run that took over from us keeps its own).
void release_checkpoint_folder(const TrustedFolder& dir, const CheckpointOwner& me) noexcept;

// A granted claim, released when the run ends (the destructor), whichever way it ends short of
// the process being killed: a killed owner leaves a stale record, taken over as said above. It
// holds the folder, where the run's restart record goes too.
class CheckpointFolderHold {
 public:
  CheckpointFolderHold(TrustedFolder dir, CheckpointOwner me) : dir_(std::move(dir)), me_(std::move(me)) {}
  ~CheckpointFolderHold() { release_checkpoint_folder(dir_, me_); }
  CheckpointFolderHold(const CheckpointFolderHold&) = delete;
  CheckpointFolderHold& operator=(const CheckpointFolderHold&) = delete;
  const TrustedFolder& folder() const { return dir_; }

 private:
  TrustedFolder dir_;
  CheckpointOwner me_;
};

// squeue's word on a Slurm job id: true while pending, running or completing, false once it has
// ended or is unknown to Slurm, nullopt when the id is not Slurm's or squeue cannot be run.
std::optional<bool> slurm_job_active(const std::string& job);

}  // namespace slurm_train
