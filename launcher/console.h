// Rank 0's terminal or batch log. On a terminal, progress is one live line rewritten in place
// (and cleared before any other line); in a batch log (stdout not a terminal) progress comes as
// plain lines, so that the file reads top to bottom. Every line also goes to the rank's log.
#pragma once

#include <functional>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>

namespace slurm_train {

class RankLog;

class Console {
 public:
  enum class Mode { kAuto, kLive, kLines };
  // print: rank 0 (the others only log). kAuto: live when stdout is a terminal, except under
  // Open MPI's mpirun, which gives every rank a pseudo-terminal even when its own output is a file.
  Console(bool print, Mode mode, bool under_mpirun, RankLog& log);
  bool is_terminal() const { return terminal_; }
  // A line for stdout (rank 0) and the rank's log.
  void line(const std::string& text);
  // Progress: on a terminal, rewrites the live line; else a plain line.
  void progress(const std::string& text);
  // Ends the live line (before the program exits or prints elsewhere).
  void end_live();

 private:
  std::mutex mutex_;
  bool print_, terminal_;
  bool live_ = false;
  RankLog& log_;
};

// An ostream whose every complete line goes to a function (the trainer's output stream).
class LineStream : public std::ostream {
 public:
  explicit LineStream(std::function<void(const std::string&)> sink);
  ~LineStream() override;

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
    void flush_partial();

   protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

   private:
    std::function<void(const std::string&)> sink_;
    std::string pending_;
  } buffer_;
};

}  // namespace slurm_train
