// Times as people and logs read them: ISO 8601 in UTC to the second, "2026-12-06T08:43:05Z".
#pragma once

#include <cstdint>
#include <string>

namespace slurm_train {

std::string utc_iso8601(std::int64_t unix_seconds);

}  // namespace slurm_train
