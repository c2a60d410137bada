#include "launcher/fault_injection.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>
#include <string_view>

namespace slurm_train {

namespace {

constexpr const char* kGrammar =
    "expected hang@STEP:RANK, crash@STEP:RANK, nan@STEP:RANK, slow@MS (each step) or slow@MS:RANK (each step of "
    "RANK), slow-ckpt@MS (each 64 KiB of a checkpoint), comma-separated";

template <typename T>
bool parse_number(std::string_view text, T& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

FaultPlan parse_fault_plan(const std::string& spec) {
  FaultPlan plan;
  if (spec.empty()) return plan;
  std::string_view rest = spec;
  for (bool more = true; more;) {
    const auto comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) rest = rest.substr(comma + 1);
    const auto at = part.find('@');
    const std::string_view kind = part.substr(0, at), arg = at == std::string_view::npos ? "" : part.substr(at + 1);
    auto bad = [&] {
      return std::invalid_argument(fmt::format("--inject-fault '{}': cannot read '{}': {}", spec, part, kGrammar));
    };
    if (at == std::string_view::npos) throw bad();
    if (kind == "slow" && arg.find(':') != std::string_view::npos) {
      const auto colon = arg.find(':');
      if (!parse_number(arg.substr(0, colon), plan.slow_ms) || !parse_number(arg.substr(colon + 1), plan.slow_rank) ||
          plan.slow_rank < 0)
        throw bad();
      continue;
    }
    if (kind == "slow" || kind == "slow-ckpt") {
      if (!parse_number(arg, kind == "slow" ? plan.slow_ms : plan.slow_checkpoint_ms)) throw bad();
      continue;
    }
    const auto colon = arg.find(':');
    FaultPlan::At where;
    if (colon == std::string_view::npos || !parse_number(arg.substr(0, colon), where.step) ||
        !parse_number(arg.substr(colon + 1), where.rank) || where.rank < 0)
      throw bad();
    if (kind == "hang")
      plan.hang = where;
    else if (kind == "crash")
      plan.crash = where;
    else if (kind == "nan")
      plan.nan = where;
    else
      throw bad();
  }
  return plan;
}

FaultAction fault_at(const FaultPlan& plan, std::uint64_t step, int rank) {
  if (plan.crash && plan.crash->step == step && plan.crash->rank == rank) return FaultAction::kCrash;
  if (plan.hang && plan.hang->step == step && plan.hang->rank == rank) return FaultAction::kHang;
  return FaultAction::kNone;
}

bool nan_at(const FaultPlan& plan, std::uint64_t step, int rank) {
  return plan.nan && plan.nan->step == step && plan.nan->rank == rank;
}

}  // namespace slurm_train
