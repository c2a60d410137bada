// A small file replaced so that a crash at any instant leaves the old or the new content, never
// a mix: write a temporary file, fsync it, rename it over PATH, fsync the folder.
//
// Temporary files carry their writer in their name (PATH.tmp-<host>-<pid>): two runs, or two
// hosts, never write one file, and a clean-up removes only its own and those of processes of its
// host that are gone, never a file another live run is writing.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace slurm_train {

// Throws std::runtime_error naming the path and the failing call.
void write_file_durably(const std::string& path, const std::string& text);
// The same for a file that a library writes (HDF5): `write` creates and fills the temporary
// path it is given; then it is fsynced, renamed over PATH and the folder fsynced. When `write`
// throws, the temporary file is removed and the exception passes on; PATH is untouched.
void write_file_durably(const std::string& path, const std::function<void(const std::string& temporary)>& write);

// fsync(2) of the file at `path`: its data and size on storage. Throws std::runtime_error naming
// the path and the failing call.
void fsync_file(const std::string& path);

// PATH.tmp-<host>-<pid>, for this process.
std::string temporary_path_for(const std::string& path);

struct TemporaryWriter {
  std::string host;
  long pid = 0;
};
// The writer named in `name`, a temporary name of `final_name` (both without folders); nullopt
// when `name` is not one.
std::optional<TemporaryWriter> temporary_writer(const std::string& name, const std::string& final_name);

// Whether this process may remove a temporary file of `writer`: its own, or one of a process of
// this host that is gone. A file of another host is never removed here (its process may live).
bool temporary_is_removable(const TemporaryWriter& writer);

// Whether a process of this host lives.
bool process_alive(long pid);

}  // namespace slurm_train
