#include "launcher/restart_env.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace slurm_train {

RestartEnv restart_env_of(const Environment& env) {
  RestartEnv r;
  if (const std::string count = env_value(env, kRestartCountVar); !count.empty()) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(count.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || n < 0 || n > 1000000)
      throw std::invalid_argument(fmt::format("{}='{}': expected the number of restarts, a whole number of 0 or more",
                                              kRestartCountVar, count));
    r.count = static_cast<int>(n);
  }
  r.cause = env_value(env, kRestartCauseVar);
  if (const std::string when = env_value(env, kFailureTimeVar); !when.empty()) {
    char* end = nullptr;
    errno = 0;
    const double t = std::strtod(when.c_str(), &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(t) || t < 0)
      throw std::invalid_argument(fmt::format("{}='{}': expected a Unix time in seconds", kFailureTimeVar, when));
    r.failure_unix = t;
  }
  r.report_path = env_value(env, kStepReportVar);
  return r;
}

}  // namespace slurm_train
