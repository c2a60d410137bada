#include "launcher/console.h"

#include <unistd.h>

#include <iostream>

#include "launcher/rank_log.h"

namespace slurm_train {

namespace {
bool live_display(slurm_train::Console::Mode mode, bool under_mpirun) {
  if (mode != slurm_train::Console::Mode::kAuto) return mode == slurm_train::Console::Mode::kLive;
  return ::isatty(STDOUT_FILENO) && !under_mpirun;
}
}  // namespace

Console::Console(bool print, Mode mode, bool under_mpirun, RankLog& log)
    : print_(print), terminal_(print && live_display(mode, under_mpirun)), log_(log) {}

void Console::line(const std::string& text) {
  log_.line(text);
  if (!print_) return;
  std::lock_guard lock(mutex_);
  if (live_) std::cout << "\r\033[K";
  live_ = false;
  std::cout << text << '\n' << std::flush;
}

void Console::progress(const std::string& text) {
  if (!terminal_) {
    line(text);
    return;
  }
  log_.line(text);
  std::lock_guard lock(mutex_);
  std::cout << "\r\033[K" << text << std::flush;
  live_ = true;
}

void Console::end_live() {
  std::lock_guard lock(mutex_);
  if (live_) std::cout << '\n' << std::flush;
  live_ = false;
}

LineStream::LineStream(std::function<void(const std::string&)> sink) : std::ostream(nullptr), buffer_(std::move(sink)) {
  rdbuf(&buffer_);
}

LineStream::~LineStream() { buffer_.flush_partial(); }

void LineStream::Buffer::flush_partial() {
  if (!pending_.empty()) sink_(pending_);
  pending_.clear();
}

LineStream::Buffer::int_type LineStream::Buffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  xsputn(&ch, 1);
  return c;
}

std::streamsize LineStream::Buffer::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) {
    if (s[i] == '\n') {
      sink_(pending_);
      pending_.clear();
    } else {
      pending_ += s[i];
    }
  }
  return n;
}

}  // namespace slurm_train
