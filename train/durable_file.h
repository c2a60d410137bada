// A small file replaced so that a crash at any instant leaves the old or the new content, never
// a mix: write PATH.tmp, fsync it, rename it over PATH, fsync the folder.
#pragma once

#include <string>

namespace slurm_train {

// Throws std::runtime_error naming the path and the failing call.
void write_file_durably(const std::string& path, const std::string& text);

}  // namespace slurm_train
