// The heartbeat file of a program under `slurm-train exec` ($SLURM_TRAIN_HEARTBEAT): the program
// proves it is alive by touching it or writing to it, and may write `STEP [COMPUTE_SECONDS]`: the
// step it reached (a decimal number), which the rank table shows and the restart rule counts as
// progress, then optionally the seconds that step spent computing (its waits in collectives left
// out), which the straggler judge compares across ranks. Python:
//   with open(os.environ["SLURM_TRAIN_HEARTBEAT"], "w") as f:
//       f.write(f"{step} {compute_seconds}")
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slurm_train {

// What a heartbeat file says.
struct HeartbeatText {
  std::optional<std::uint64_t> step;
  std::optional<double> compute_seconds;  // finite and >= 0; only with a step
};

// `STEP [COMPUTE_SECONDS]`: a whole decimal number, then optionally a decimal number, separated
// by blanks, blanks around them allowed. Any other text (a file only touched, a word, a third
// field) says nothing; compute seconds that are negative, NaN or infinite are left out and the
// step kept.
HeartbeatText parse_heartbeat(std::string_view text);

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
  // it says, if it says one, and compute_seconds() the compute seconds written with that step.
  bool changed();
  std::optional<std::uint64_t> step() const { return step_; }
  std::optional<double> compute_seconds() const { return compute_seconds_; }

 private:
  std::string folder_, path_;
  timespec mtime_{};
  off_t size_ = 0;
  std::optional<std::uint64_t> step_;
  std::optional<double> compute_seconds_;
};

}  // namespace slurm_train
