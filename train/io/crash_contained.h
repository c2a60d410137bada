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
#include <vector>

namespace slurm_train {

// Runs `read` in a child process and waits for it, at most `time_limit`. Returns what went wrong,
// as a phrase that follows "reading it": "ended in signal 11 (Segmentation fault)", "ended in
// exit status 1", "was stopped after 61 s without finishing"; nullopt when `read` returned or
// threw, or when no child could be started (the read then runs uncontained, as it did before).
// The child's standard error goes to /dev/null, it writes no core file, and it dies with this
// process (or this thread): nothing is left reading when the caller is gone.
std::optional<std::string> crash_in_child(const std::function<void()>& read, std::chrono::milliseconds time_limit);

// A read as a separate program runs it: the name of a reader that run_contained_read knows, and
// its arguments; `in_process` is the same read, for a fork where no program is set.
struct ContainedRead {
  std::string reader;
  std::vector<std::string> args;
  std::function<void()> in_process;
};

// The program that runs contained reads: slurm-train sets itself, so that reads run in a fresh
// small process rather than in a fork of a large one, whose every page this process would then
// fault on as it writes (copy-on-write), and which MPI libraries with registered memory do not
// support. The first read starts the program once as a server (`PROGRAM --contained-read-server
// PID`, one socket at descriptor kServerSocket), which keeps a child of itself forked ahead of the
// next read, its page tables already filled, and forks the next once a read is answered: a read
// pays neither a program's start nor a fresh fork's page faults. Where the server cannot be started or stops answering,
// each read starts the program (`PROGRAM --contained-read PID READER ARGS...`). Unset (fuzz
// targets, tests): reads fork this process and run in_process.
void set_contained_read_program(std::string path);
// Starts that server now rather than at the first read, for a program that reads soon and has
// other work until then; nothing when no program is set or the server runs already.
void start_contained_read_server();
// Whether reads run in a program set above (true), or in a fork of this process (false), which
// must then have no other thread running: a thread could hold a lock the child needs.
bool contained_reads_run_elsewhere();
inline constexpr const char* kContainedReadFlag = "--contained-read";
inline constexpr const char* kContainedReadServerFlag = "--contained-read-server";
inline constexpr int kServerSocket = 3;

// crash_in_child for `read`: in the program when one is set, else in a fork.
std::optional<std::string> crash_in_child(const ContainedRead& read, std::chrono::milliseconds time_limit);

// In the program: the first thing it does in a process started for contained reads. Sets it up
// (dies with its parent, no core file), then runs the reader that `argv` names through `run`
// (which returns the exit status: 0 when the read returned or threw cleanly), or, started as the
// server, serves reads until its parent is gone.
int contained_read_child(
    int argc, char** argv,
    const std::function<int(const std::string& reader, const std::vector<std::string>& args)>& run);

// How long reading the file at `path` may take before it counts as a hang: the base limit plus
// the file's size at 10 MB/s, slow shared storage under load included.
std::chrono::milliseconds time_limit_to_read(const std::string& path);

// The base of time_limit_to_read, 60 s unless set. Fuzz targets lower it to stay inside their
// own per-input limit.
void set_base_time_limit_to_read(std::chrono::milliseconds base);

}  // namespace slurm_train
