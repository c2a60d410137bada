// contained_reads READER...: runs each named read through the contained-read server, as
// slurm-train runs its first passes over outside files (train/io/crash_contained.h), and prints
// one line a read: "READER: finished" or "READER: <what ended it>". The readers:
//   finish   returns            throw   throws (a clean rejection: finished)
//   segv     SIGSEGV            abort   abort()
//   exit3    exits with 3       hang    never returns (stopped at the time limit)
// and two steps that are not reads:
//   kill-spare   SIGKILLs the server's child that waits for the next read, as an OOM killer or
//                an administrator might, and waits until it is gone
//   children     prints "children: N server S: P...", the children P the server S has now (its
//                spare child)
// CONTAINED_READS_LIMIT_MS sets the time limit of each read (default 2000).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "train/io/crash_contained.h"

using namespace slurm_train;

namespace {

int run_reader(const std::string& reader, const std::vector<std::string>&) {
  if (reader == "finish") return 0;
  if (reader == "throw") {
    try {
      throw std::runtime_error("a clean rejection");
    } catch (const std::exception&) {
      return 0;
    }
  }
  if (reader == "segv") ::raise(SIGSEGV);
  if (reader == "abort") std::abort();
  if (reader == "exit3") std::_Exit(3);
  if (reader == "hang")
    for (;;) ::pause();
  return 2;
}

// The pids listed in /proc/PID/task/*/children (Linux 3.5 and later).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> found;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t child; in >> child;) found.push_back(child);
  return found;
}

// The server is this process's only child while no read runs.
pid_t server() {
  const std::vector<pid_t> mine = children_of(::getpid());
  return mine.size() == 1 ? mine[0] : -1;
}

// Waits up to 5 s for the server to have `n` children.
std::vector<pid_t> wait_for_children(std::size_t n) {
  std::vector<pid_t> now;
  for (int i = 0; i < 500; ++i) {
    now = children_of(server());
    if (now.size() == n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return now;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 &&
      (std::string_view(argv[1]) == kContainedReadFlag || std::string_view(argv[1]) == kContainedReadServerFlag))
    return contained_read_child(argc, argv, run_reader);
  set_contained_read_program("/proc/self/exe");
  const char* limit_text = std::getenv("CONTAINED_READS_LIMIT_MS");
  const std::chrono::milliseconds limit{limit_text ? std::atoll(limit_text) : 2000};
  for (int i = 1; i < argc; ++i) {
    const std::string step = argv[i];
    if (step == "kill-spare" || step == "children") {
      start_contained_read_server();
      const std::vector<pid_t> spare = wait_for_children(1);
      if (step == "children") {
        std::cout << "children: " << spare.size() << " server " << server() << ":";
        for (const pid_t p : spare) std::cout << " " << p;
        std::cout << std::endl;
        continue;
      }
      if (spare.size() != 1) {
        std::cout << "kill-spare: the server has " << spare.size() << " children, not 1" << std::endl;
        return 1;
      }
      ::kill(spare[0], SIGKILL);
      // Gone from /proc once the server reaps it; a zombie stays listed until then.
      for (int k = 0; k < 500 && ::kill(spare[0], 0) == 0; ++k) {
        std::ifstream stat("/proc/" + std::to_string(spare[0]) + "/stat");
        std::string pid, name, state;
        if (stat >> pid >> name >> state && state == "Z") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::cout << "kill-spare: killed " << spare[0] << std::endl;
      continue;
    }
    const auto outcome = crash_in_child(ContainedRead{step, {}, [] {}}, limit);
    std::cout << step << ": " << (outcome ? *outcome : "finished") << std::endl;
  }
  return 0;
}
