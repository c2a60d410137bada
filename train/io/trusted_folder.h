// A folder that holds a job's state, opened once and then held by its descriptor.
//
// Opening walks the path from / one entry at a time with openat(O_NOFOLLOW), each link read and
// judged before it is followed, and judges every entry by folder_trust.h's rule as it goes: what
// is judged is what is opened, with no window between a check and an open by path. Every file the
// job then makes, replaces or appends to there is opened through the held descriptor, so a link
// repointed or a folder renamed after the walk changes nothing for this job:
//   - create_exclusive: a new file, O_CREAT|O_EXCL|O_NOFOLLOW (the caller picks a name no one
//     can foresee, or one that must not exist yet);
//   - replace: durable_file.h's protocol (a temporary file of a random name made exclusively,
//     fsync, renameat over the name, the folder fsynced);
//   - open_append: a file that the job keeps adding to (a rank log, the metrics): no link is
//     followed, and a file that belongs to another user, that every user can write or that is
//     no regular file is refused: its content would be another's, or hold the job up.
// A library that opens files by path (HDF5) is given /proc/self/fd/<fd>/<name> (file()), which
// the kernel resolves through the held folder.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/io/file_path.h"
#include "train/io/folder_trust.h"

namespace slurm_train {

class TrustedFolder {
 public:
  // Opens `path`, which messages call `kind` ("the checkpoint folder"); with `create`, the
  // folders that are missing are made (mode 0775 less the umask: never writable by others).
  // Throws UntrustedFolder naming the entry that fails the rule; std::system_error naming the
  // call and the path when the folder cannot be opened or made.
  TrustedFolder(const std::string& kind, const std::string& path, bool create);
  ~TrustedFolder();
  TrustedFolder(TrustedFolder&& other) noexcept;
  TrustedFolder& operator=(TrustedFolder&& other) noexcept;
  TrustedFolder(const TrustedFolder&) = delete;
  TrustedFolder& operator=(const TrustedFolder&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // PATH/NAME, for messages.
  std::string shown(const std::string& name) const;
  // NAME as a library opens it (through the descriptor) and as messages name it.
  FilePath file(const std::string& name) const;

  // A new file opened for writing. Throws std::system_error naming it (EEXIST when it exists).
  int create_exclusive(const std::string& name, mode_t mode = 0644) const;
  // NAME opened for appending, made when missing. `kind` names it in messages ("the rank log").
  // Throws UntrustedFolder when it is another user's, every user's to write, or not a regular
  // file; std::runtime_error naming the call otherwise.
  int open_append(const std::string& name, const std::string& kind, mode_t mode = 0644) const;
  // durable_file.h's two halves, for a file that several processes fill: a new temporary file
  // for NAME (its name returned), and its commit over NAME.
  std::string create_temporary(const std::string& name) const;
  void commit_temporary(const std::string& temporary, const std::string& name) const;
  // NAME replaced durably by `text`, or by what `write` puts in the temporary file it is given.
  void replace(const std::string& name, const std::string& text) const;
  void replace(const std::string& name, const std::function<void(const FilePath& temporary)>& write) const;
  // The same without the fsyncs (durable_file.h's replace_file_at).
  void replace_unsynced(const std::string& name, const std::string& text) const;
  // NAME's content, at most `limit` bytes (no link followed); nullopt when it does not exist.
  // Throws std::runtime_error naming the file otherwise.
  std::optional<std::string> read(const std::string& name, std::size_t limit = std::size_t{1} << 24) const;
  // Removes NAME; false when there was none. Throws std::runtime_error naming it otherwise.
  bool remove(const std::string& name) const;
  // NAME made a second name of `from` (link(2)): false when NAME exists. Throws otherwise.
  bool link(const std::string& from, const std::string& name) const;
  // Renames `from` to NAME; false when `from` does not exist. Throws otherwise.
  bool rename(const std::string& from, const std::string& name) const;
  // The names of the folder's entries, "." and ".." left out.
  std::vector<std::string> names() const;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace slurm_train
