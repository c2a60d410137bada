// The heartbeat file of a program under `slurm-train exec` ($SLURM_TRAIN_HEARTBEAT): the program
// proves it is alive by touching it or writing to it, and may write the step it reached (a
// decimal number), which the rank table shows and the restart rule counts as progress. Python:
//   with open(os.environ["SLURM_TRAIN_HEARTBEAT"], "w") as f:
//       f.write(str(step))
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slurm_train {

// The step a heartbeat file holds: a decimal number, blanks around it allowed; nullopt for
// anything else (a file only touched, or written with other text).
std::optional<std::uint64_t> parse_heartbeat_step(std::string_view text);

class HeartbeatFile {
 public:
  // Creates the file "heartbeat" in a new folder of its own, `prefix` followed by six random
  // characters (mkdtemp, mode 0700): no other user can foresee its name, make it first, see it
  // or touch it, which would hide a hang. Throws std::runtime_error naming it when it cannot.
  explicit HeartbeatFile(const std::string& prefix);
  ~HeartbeatFile() { remove(); }
  HeartbeatFile(const HeartbeatFile&) = delete;
  HeartbeatFile& operator=(const HeartbeatFile&) = delete;

  const std::string& path() const { return path_; }
  // Removes the file and its folder (also from the watchdog's thread, before _exit).
  void remove() noexcept;
  // True when the file changed (time or size) since the last look; step() then holds the step
  // it says, if it says one.
  bool changed();
  std::optional<std::uint64_t> step() const { return step_; }

 private:
  std::string folder_, path_;
  timespec mtime_{};
  off_t size_ = 0;
  std::optional<std::uint64_t> step_;
};

}  // namespace slurm_train
