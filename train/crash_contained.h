// libhdf5 1.10 (Debian 12's) reads out of bounds, frees twice or loops forever on some corrupt or
// crafted files instead of returning an error, and so would crash or hang whatever program reads
// them. A reader of a file from outside (a checkpoint to resume, a dataset) therefore runs once
// in a forked child first: if the child crashes or does not finish in time, the file is refused
// with an error and the program goes on; if it returns or throws, the real read runs in this
// process and finds the same error or result.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace slurm_train {

// Runs `read` in a child process and waits for it, at most `time_limit`. Returns what went wrong,
// as a phrase that follows "reading it": "ended in signal 11 (Segmentation fault)", "ended in
// exit status 1", "was stopped after 61 s without finishing"; nullopt when `read` returned or
// threw, or when no child could be started (the read then runs uncontained, as it did before).
// The child's standard error goes to /dev/null, it writes no core file, and it dies with this
// process (or this thread): nothing is left reading when the caller is gone.
std::optional<std::string> crash_in_child(const std::function<void()>& read, std::chrono::milliseconds time_limit);

// How long reading the file at `path` may take before it counts as a hang: the base limit plus
// the file's size at 10 MB/s, slow shared storage under load included.
std::chrono::milliseconds time_limit_to_read(const std::string& path);

// The base of time_limit_to_read, 60 s unless set. Fuzz targets lower it to stay inside their
// own per-input limit.
void set_base_time_limit_to_read(std::chrono::milliseconds base);

}  // namespace slurm_train
