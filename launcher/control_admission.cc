#include "launcher/control_admission.h"

#include <fmt/format.h>

namespace slurm_train {

bool ControlAdmission::admit(const std::string& source) {
  std::size_t& n = pending_by_source_[source];
  if (n >= limits_.per_source) return false;
  ++n;
  ++pending_;
  return true;
}

void ControlAdmission::settled(const std::string& source) {
  const auto it = pending_by_source_.find(source);
  if (it == pending_by_source_.end() || it->second == 0) return;
  if (--it->second == 0) pending_by_source_.erase(it);
  --pending_;
}

bool ControlAdmission::refuse(ControlRefusal kind) { return refused_[static_cast<std::size_t>(kind)]++ == 0; }

const char* short_name(ControlRefusal kind) {
  switch (kind) {
    case ControlRefusal::kNotAHello:
      return "not a hello";
    case ControlRefusal::kUnproven:
      return "without a valid proof";
    case ControlRefusal::kOtherUser:
      return "of another user";
    case ControlRefusal::kOtherJob:
      return "for another job, step, rank or challenge";
    case ControlRefusal::kDuplicateRank:
      return "for a rank already connected";
    case ControlRefusal::kSilent:
      return "silent";
    case ControlRefusal::kTooMany:
      return "over the limit of their address";
  }
  return "?";
}

std::string ControlAdmission::summary() const {
  std::uint64_t total = 0;
  std::string kinds;
  for (int k = 0; k < kControlRefusalKinds; ++k) {
    const std::uint64_t n = refused_[static_cast<std::size_t>(k)];
    if (n == 0) continue;
    total += n;
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, short_name(static_cast<ControlRefusal>(k)));
  }
  return total == 0 ? "" : fmt::format("{} connection(s) refused: {}", total, kinds);
}

}  // namespace slurm_train
