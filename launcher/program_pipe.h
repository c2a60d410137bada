// The named pipe a program under `slurm-train exec` writes its lines to
// ($SLURM_TRAIN_PROGRAM_PIPE; launcher/program_message.h says what they hold). It sits in a
// folder of its own, made with mkdtemp (mode 0700), so that no other user can foresee, open or
// write it. The supervisor keeps it open for reading and writing: the program may open and
// close it any number of times without the reader seeing an end, and its opening never blocks.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace slurm_train {

class ProgramPipe {
 public:
  // Throws std::runtime_error naming the path when the folder or the pipe cannot be made.
  explicit ProgramPipe(const std::string& prefix);
  ~ProgramPipe();
  ProgramPipe(const ProgramPipe&) = delete;
  ProgramPipe& operator=(const ProgramPipe&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }  // to poll for POLLIN
  // Every complete line written so far, each without its newline, in order. A line longer than
  // kMaxProgramLine is skipped whole and reported to `too_long` with its length.
  void read_lines(const std::function<void(std::string_view)>& line, const std::function<void(std::size_t)>& too_long);
  // Removes the pipe and its folder (also from the watchdog's thread, before _exit).
  void remove() noexcept;

 private:
  std::string folder_, path_;
  int fd_ = -1;
  std::string partial_;
  bool skipping_ = false;  // inside a line too long to keep
  std::size_t skipped_ = 0;
};

}  // namespace slurm_train
