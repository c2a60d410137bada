// libhdf5 1.10 (Debian 12's) reads out of bounds or frees twice on some corrupt or crafted files
// instead of returning an error, and so would crash whatever program reads them. A reader of a
// file from outside (a checkpoint to resume, a dataset) therefore runs once in a forked child
// first: if the child crashes, the file is refused with an error and the program goes on; if it
// returns or throws, the real read runs in this process and finds the same error or result.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace slurm_train {

// Runs `read` in a child process and waits for it. Returns what ended the child when it did not
// finish ("signal 11 (Segmentation fault)", "exit status 1"); nullopt when `read` returned or
// threw, or when no child could be started (the read then runs uncontained, as it did before).
// The child's standard error goes to /dev/null and it writes no core file: the caller reports
// the crash once, naming the file.
std::optional<std::string> crash_in_child(const std::function<void()>& read);

}  // namespace slurm_train
