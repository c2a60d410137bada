// A small file replaced so that a crash at any instant leaves the old or the new content, never
// a mix: write a temporary file, fsync it, rename it over PATH, fsync the folder.
//
// The folder is opened once, and every step goes through its descriptor (openat, renameat), so
// the file lands in the folder that was opened whatever happens to its path meanwhile. The
// temporary file is made exclusively (O_CREAT|O_EXCL, no link followed) under a name no one can
// foresee: PATH.tmp-<host>-<pid>.<8 random characters>. The name carries its writer: two runs,
// or two hosts, never write one file, and a clean-up removes only its own and those of processes
// of its host that are gone, never a file another live run is writing.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "train/io/file_path.h"

namespace slurm_train {

// Throws std::runtime_error naming the path and the failing call.
void write_file_durably(const std::string& path, const std::string& text);
// The same for a file that a library writes (HDF5): `write` fills the temporary file, which
// exists (empty) and is named by the FilePath it is given; then it is fsynced, renamed over PATH
// and the folder fsynced. When `write` throws, the temporary file is removed and the exception
// passes on; PATH is untouched.
void write_file_durably(const std::string& path, const std::function<void(const FilePath& temporary)>& write);
// Both for NAME in the folder open as `dirfd` (for reading: it is fsynced), which messages call
// `dir`: a TrustedFolder's.
void write_file_durably_at(int dirfd, const std::string& dir, const std::string& name, const std::string& text);
void write_file_durably_at(int dirfd, const std::string& dir, const std::string& name,
                           const std::function<void(const FilePath& temporary)>& write);

// The same without the fsyncs, for a small file rewritten often whose newest content a crash may
// lose (a step report's progress, four times a second): whole, never a mix, but not durable.
void replace_file_at(int dirfd, const std::string& dir, const std::string& name, const std::string& text);

// The two halves of write_file_durably_at, for a file that several processes fill between them
// (a checkpoint every rank writes a part of, train/checkpoint/checkpoint_parallel.h): a new
// temporary file for NAME, made exclusively and empty (its name returned); and its commit:
// fsync, renamed over NAME, the folder fsynced. A commit that throws leaves the temporary file
// to the caller.
std::string create_temporary_at(int dirfd, const std::string& dir, const std::string& name);
void commit_temporary_at(int dirfd, const std::string& dir, const std::string& temporary, const std::string& name);

// NAME.tmp-<host>-<pid>.<8 random characters>, for this process (NAME without its folder).
std::string temporary_name_for(const std::string& name);

struct TemporaryWriter {
  std::string host;
  long pid = 0;
};
// The writer named in `name`, a temporary name of `final_name` (both without folders), with its
// random suffix or without (as earlier versions named them); nullopt when `name` is not one.
std::optional<TemporaryWriter> temporary_writer(const std::string& name, const std::string& final_name);

// Whether this process may remove a temporary file of `writer`: its own, or one of a process of
// this host that is gone. A file of another host is never removed here (its process may live).
bool temporary_is_removable(const TemporaryWriter& writer);

// Whether a process of this host lives.
bool process_alive(long pid);

}  // namespace slurm_train
