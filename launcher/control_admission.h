// Rank 0's rules for connections that have not yet proved themselves (launcher/control_auth.h):
// how many may wait at once, from one address and in all, how long each may take, and which
// kinds of refusal the log has told of already (each once: a thousand strangers make one line,
// and a count at the end). Pure: launcher/watchdog.cc holds the sockets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "launcher/control_auth.h"

namespace slurm_train {

class ControlAdmission {
 public:
  struct Limits {
    // A node's tasks knock at once; more waiting from one address are not a job's own.
    std::size_t per_source = 256;
    // Beyond it rank 0 stops accepting for a moment: new connections wait in the listen backlog.
    std::size_t pending = 2048;
    // From accept to a whole hello (a rank sends it at once; a credential takes milliseconds).
    double hello_seconds = 5;
  };
  ControlAdmission() = default;
  explicit ControlAdmission(Limits limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }

  bool accepting() const { return pending_ < limits_.pending; }
  // A new connection from `source`: true when it may prove itself (pending until settled());
  // false when its address has per_source connections pending already.
  bool admit(const std::string& source);
  // A pending connection from `source` is done with, let in or not.
  void settled(const std::string& source);
  std::size_t pending() const { return pending_; }

  // Counts a refusal; true for the first of its kind, the one to log.
  bool refuse(ControlRefusal kind);
  std::uint64_t refused(ControlRefusal kind) const { return refused_[static_cast<std::size_t>(kind)]; }
  // "N connection(s) refused: A <kind>, B <kind>"; empty when none was.
  std::string summary() const;

 private:
  Limits limits_;
  std::size_t pending_ = 0;
  std::unordered_map<std::string, std::size_t> pending_by_source_;
  std::array<std::uint64_t, kControlRefusalKinds> refused_{};
};

// The short name of a kind, for the summary: "not a hello", "silent", ...
const char* short_name(ControlRefusal kind);

}  // namespace slurm_train
