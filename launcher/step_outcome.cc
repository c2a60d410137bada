#include "launcher/step_outcome.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "launcher/exit_codes.h"

namespace slurm_train {

namespace {

constexpr std::array<std::pair<StepCause, const char*>, 13> kNames{{
    {StepCause::kRunning, "running"},
    {StepCause::kDone, "done"},
    {StepCause::kRankLost, "rank-lost"},
    {StepCause::kRankFailed, "rank-failed"},
    {StepCause::kHang, "hang"},
    {StepCause::kNeverConnected, "never-connected"},
    {StepCause::kDiverged, "diverged"},
    {StepCause::kConfig, "config"},
    {StepCause::kCheckpointWrite, "checkpoint-write"},
    {StepCause::kPreempted, "preempted"},
    {StepCause::kGaveUp, "gave-up"},
    {StepCause::kFolderBusy, "folder-busy"},
    {StepCause::kOutOfMemory, "out-of-memory"},
}};

}  // namespace

const char* cause_name(StepCause cause) {
  for (const auto& [c, name] : kNames)
    if (c == cause) return name;
  return "unknown";
}

StepCause parse_cause(const std::string& name) {
  for (const auto& [c, n] : kNames)
    if (name == n) return c;
  throw std::invalid_argument(fmt::format("'{}' is no step cause", name));
}

StepCause cause_of_exit_code(int exit_code) {
  switch (exit_code) {
    case kExitOk:
      return StepCause::kDone;
    case kExitUsage:
      return StepCause::kConfig;
    case kExitCheckpointWrite:
      return StepCause::kCheckpointWrite;
    case kExitHang:
      return StepCause::kHang;
    case kExitRequeued:
    case kExitPreempted:
      return StepCause::kPreempted;
    case kExitDoNotRequeue:
      return StepCause::kGaveUp;
    case kExitCheckpointDirBusy:
      return StepCause::kFolderBusy;
    case kExitDiverged:
      return StepCause::kDiverged;
    default:
      return StepCause::kRankFailed;
  }
}

StepOutcome step_verdict(int exit_code, std::string message, std::uint64_t step) {
  StepOutcome o;
  o.cause = cause_of_exit_code(exit_code);
  o.exit_code = exit_code;
  o.step = step;
  o.message = std::move(message);
  return o;
}

std::string format_step_outcome(const StepOutcome& o) {
  const nlohmann::json j{{"cause", cause_name(o.cause)},
                         {"exit_code", o.exit_code},
                         {"rank", o.rank},
                         {"host", o.host},
                         {"step", o.step},
                         {"started_from", o.started_from},
                         {"connected_unix", o.connected_unix},
                         {"started_unix", o.started_unix},
                         {"ended_unix", o.ended_unix},
                         {"message", o.message},
                         {"stragglers", o.stragglers},
                         {"gpu_fault", o.gpu_fault}};
  return j.dump() + "\n";
}

StepOutcome parse_step_outcome(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    StepOutcome o;
    o.cause = parse_cause(j.at("cause").get<std::string>());
    o.exit_code = j.at("exit_code").get<int>();
    o.rank = j.at("rank").get<int>();
    o.host = j.at("host").get<std::string>();
    o.step = j.at("step").get<std::uint64_t>();
    o.started_from = j.at("started_from").get<std::uint64_t>();
    if (j.contains("connected_unix")) o.connected_unix = j.at("connected_unix").get<double>();
    o.started_unix = j.at("started_unix").get<double>();
    o.ended_unix = j.at("ended_unix").get<double>();
    o.message = j.at("message").get<std::string>();
    if (j.contains("stragglers")) o.stragglers = j.at("stragglers").get<std::vector<std::string>>();
    if (j.contains("gpu_fault")) o.gpu_fault = j.at("gpu_fault").get<std::string>();
    return o;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("not a step outcome: {}", e.what()));
  }
}

void write_step_outcome(const TrustedFolder& dir, const std::string& name, const StepOutcome& outcome) {
  dir.replace(name, format_step_outcome(outcome));
}

std::optional<StepOutcome> read_step_outcome(const TrustedFolder& dir, const std::string& name) {
  const std::optional<std::string> text = dir.read(name);
  if (!text) return std::nullopt;
  try {
    return parse_step_outcome(*text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: {}", dir.shown(name), e.what()));
  }
}

}  // namespace slurm_train
