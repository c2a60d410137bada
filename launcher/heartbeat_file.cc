#include "launcher/heartbeat_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "launcher/private_folder.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The text up to the next blank, taken off the front of `text`.
std::string_view next_field(std::string_view& text) {
  text = trim(text);
  std::size_t n = 0;
  while (n < text.size() && !is_blank(text[n])) ++n;
  const std::string_view field = text.substr(0, n);
  text.remove_prefix(n);
  return field;
}

}  // namespace

HeartbeatText parse_heartbeat(std::string_view text) {
  const std::string_view step_field = next_field(text), compute_field = next_field(text);
  std::uint64_t step = 0;
  const auto [step_end, step_ec] = std::from_chars(step_field.data(), step_field.data() + step_field.size(), step);
  if (step_field.empty() || step_ec != std::errc() || step_end != step_field.data() + step_field.size() ||
      !trim(text).empty())
    return {};
  if (compute_field.empty()) return {step, std::nullopt};
  double compute = 0;
  const auto [end, ec] = std::from_chars(compute_field.data(), compute_field.data() + compute_field.size(), compute);
  if (end != compute_field.data() + compute_field.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return {};
  // A number out of a double's range (1e999, 1e-999) is left out as an infinite one is.
  if (ec != std::errc() || !std::isfinite(compute) || compute < 0) return {step, std::nullopt};
  return {step, compute};
}

HeartbeatFile::HeartbeatFile(const std::string& prefix) {
  folder_ = make_private_folder(prefix, "the heartbeat file");
  path_ = folder_ + "/heartbeat";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int err = errno;
    ::rmdir(folder_.c_str());
    throw std::runtime_error(fmt::format("cannot create the heartbeat file '{}': {}", path_, std::strerror(err)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  mtime_ = st.st_mtim;
  ::close(fd);
}

void HeartbeatFile::remove() noexcept {
  ::unlink(path_.c_str());
  ::rmdir(folder_.c_str());
}

bool HeartbeatFile::changed() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;
  if (st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec && st.st_size == size_) return false;
  mtime_ = st.st_mtim;
  size_ = st.st_size;
  char text[64];
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::pread(fd, text, sizeof text, 0);
    ::close(fd);
    // A write caught half-way reads as no number: the step stays what it was.
    if (n > 0)
      if (const HeartbeatText said = parse_heartbeat(std::string_view(text, static_cast<std::size_t>(n))); said.step) {
        step_ = said.step;
        compute_seconds_ = said.compute_seconds;
      }
  }
  return true;
}

}  // namespace slurm_train
