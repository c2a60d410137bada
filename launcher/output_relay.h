// A supervised program's output: every line of its stdout and stderr to the rank's log (with the
// UTC time and the rank), echoed to the supervisor's console (rank 0: all of it, as it comes;
// the others: their stderr, each line marked with the rank), and the last lines kept for the
// message that names a rank whose program failed.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace slurm_train {

class RankLog;

class OutputRelay {
 public:
  enum class Stream { kStdout, kStderr };
  // `echo` receives what goes to the console: (stream, bytes). Rank 0 echoes both streams raw,
  // the others their stderr lines prefixed "[rank N] ".
  using Echo = std::function<void(Stream, std::string_view)>;
  OutputRelay(RankLog& log, int rank, Echo echo, std::size_t tail_lines = 10);

  void take(Stream stream, std::string_view bytes);
  // The end of the output: an unfinished last line is logged as it is.
  void flush();
  // The last lines of both streams in the order they came, each cut to 200 characters.
  std::string tail() const;

 private:
  void complete_line(Stream stream, std::string line);

  RankLog& log_;
  int rank_;
  Echo echo_;
  std::size_t tail_lines_;
  std::string pending_[2];
  std::deque<std::string> tail_;
};

}  // namespace slurm_train
