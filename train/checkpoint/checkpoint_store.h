// A folder of checkpoints on (shared) storage: the atomic commit of a new one, the keep policy,
// listing, and finding the newest one that loads. The launcher's preemption and auto-resume
// call save_checkpoint and load_newest_valid_checkpoint; `slurm-train ckpt` lists and
// verifies with the same functions.
//
// The folder is opened once as a TrustedFolder (train/io/trusted_folder.h): every path on the way
// judged, and every file below made, renamed and removed through its descriptor.
//
// Commit protocol (a crash at any instant leaves every older checkpoint intact and never a
// step-*.h5 that is not complete):
//   1. write step-<8 digits>.h5.tmp-<host>-<pid>.<random> (made exclusively), flush it, fsync it
//   2. rename it to step-<8 digits>.h5, fsync the folder (the rename is now durable)
//   3. write latest.tmp-<host>-<pid>.<random> ("step-<8 digits>.h5\n"), fsync it, rename it to latest,
//      fsync the folder
//   4. remove what the keep policy no longer keeps, and stale temporary files: this process's
//      own and those of dead processes of this host, never another live writer's (the folder
//      belongs to one job at a time, launcher/checkpoint_owner.h, and the names keep it so even
//      without that)
// Readers trust the step-*.h5 files (each verified by its checksums), not `latest`: `latest` is
// for people and scripts, and at worst names a checkpoint one behind the newest.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint/best_checkpoint.h"
#include "train/checkpoint/checkpoint_state.h"
#include "train/io/trusted_folder.h"

namespace slurm_train {

struct KeepPolicy {
  std::uint64_t keep = 0;        // newest N; 0: all
  std::uint64_t keep_every = 0;  // and every K-th step; 0: none extra
};

// DIR opened as "the checkpoint folder" (made when missing with `create`). Throws
// UntrustedFolder when another user could change it, CheckpointWriteError naming the path when
// it cannot be opened or made.
TrustedFolder open_checkpoint_folder(const std::string& dir, bool create);

// Commits `state` as DIR/step-<state.counters.step>.h5, updates DIR/latest and applies `keep`;
// returns the checkpoint's path. Throws CheckpointWriteError naming the path; older checkpoints
// stay intact, and the partial .tmp is removed when possible. slow_ms: write_checkpoint_file's
// testing aid.
std::string save_checkpoint(const TrustedFolder& folder, const CheckpointState& state, KeepPolicy keep,
                            unsigned slow_ms = 0);
// The same in DIR, opened (and made when missing) for this one checkpoint.
std::string save_checkpoint(const std::string& dir, const CheckpointState& state, KeepPolicy keep,
                            unsigned slow_ms = 0);

// Steps 3 and 4 of the protocol, once DIR/step-<step>.h5 is committed (a parallel write,
// checkpoint_parallel.h, commits its file itself). With `best` (this step's checkpoint is the
// best so far), DIR/best is committed after `latest`, before the keep policy runs; the keep
// policy never removes the checkpoint DIR/best names.
void record_latest_and_keep(const TrustedFolder& folder, std::uint64_t step, KeepPolicy keep,
                            const std::optional<BestRecord>& best = std::nullopt);
// DIR/best, or nullopt when there is none; a marker that does not parse is reported through
// `warn` and taken as none.
std::optional<BestRecord> read_best_marker(const std::string& dir,
                                           const std::function<void(const std::string&)>& warn = {});
// A path that names a checkpoint folder's marker, DIR/best or DIR/latest, as the checkpoint it
// names (DIR/step-NNNNNNNN.h5); any other path as it is. Throws std::runtime_error when the
// marker cannot be read or names nothing.
std::string resolve_checkpoint_marker(const std::string& path);

struct CheckpointEntry {
  std::uint64_t step = 0;
  std::string path;
  std::uintmax_t bytes = 0;
  std::time_t modified = 0;
};
// Removes the temporary files of the folder (checkpoints, latest, best, restarts) that this
// process wrote or that a process of this host that is gone left behind.
void remove_stale_temporaries(const TrustedFolder& folder);

// The committed checkpoints of DIR (no temporary files), oldest first; empty when DIR is missing.
std::vector<CheckpointEntry> list_checkpoints(const std::string& dir);

// The newest checkpoint of DIR that reads back with every checksum right, loaded; each newer one
// that does not is reported through `warn` (file and dataset) and skipped. nullopt when DIR holds
// none that loads.
std::optional<CheckpointState> load_newest_valid_checkpoint(const std::string& dir,
                                                            const std::function<void(const std::string&)>& warn);

// The same into `into`, whose buffers keep their capacity (a resume reads straight into the
// run's own buffers). Each failed candidate may leave `into` partly overwritten: its contents
// are meaningful only when this returns true. With `expected`, a checkpoint of another model
// is no damaged file to skip: its CheckpointMismatch is thrown.
bool load_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn,
                                  CheckpointState& into, const ModelLayout* expected = nullptr);

// The same choice without reading the state into memory (each candidate checked as `ckpt verify`
// checks it): the path of the newest valid checkpoint, or "".
std::string find_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn);

// What a command that reads one checkpoint (`sample`, `serve`) makes of its argument: a file as
// it is, a marker (DIR/best, DIR/latest) as the file it names, a folder as its newest valid
// checkpoint (the ones skipped told to `warn`). Throws std::runtime_error naming a folder without
// a valid checkpoint.
std::string checkpoint_to_read(const std::string& given, const std::function<void(const std::string&)>& warn);

}  // namespace slurm_train
