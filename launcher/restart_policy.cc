#include "launcher/restart_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "launcher/exit_codes.h"

namespace slurm_train {

namespace {

bool never_restarted(StepCause cause) {
  switch (cause) {
    case StepCause::kDone:
    case StepCause::kConfig:
    case StepCause::kPreempted:
    case StepCause::kGaveUp:
    case StepCause::kFolderBusy:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool node_level_cause(StepCause cause) {
  return cause == StepCause::kRankLost || cause == StepCause::kHang || cause == StepCause::kNeverConnected;
}

std::string node_fault(const std::vector<Attempt>& before, const Attempt& last) {
  if (last.node.empty()) return "";
  if (!last.gpu_fault.empty()) return fmt::format("{} there", last.gpu_fault);
  if (node_level_cause(last.cause)) return fmt::format("{} there", cause_name(last.cause));
  if (last.cause != StepCause::kOutOfMemory) return "";
  for (const auto& a : before)
    if (a.cause == StepCause::kOutOfMemory && a.node == last.node)
      return "the out-of-memory killer ended a rank there twice in this job";
  return "";
}

NextStep next_step(const std::vector<Attempt>& attempts, const std::vector<std::string>& allocation,
                   const std::set<std::string>& left_out, int step_nodes, const RestartLimits& limits) {
  if (attempts.empty()) throw std::logic_error("next_step: no attempt has ended");
  const Attempt& last = attempts.back();
  NextStep next;
  next.exit_code = last.exit_code;
  if (never_restarted(last.cause)) {
    next.why = last.cause == StepCause::kDone ? "training finished"
               : last.cause == StepCause::kConfig
                   ? "a configuration error is not restarted"
                   : fmt::format("the step ended with {} (exit {}), which a restart would not mend",
                                 cause_name(last.cause), last.exit_code);
    return next;
  }
  if (last.exit_code == kExitOk) {
    next.why = "the step exited 0";
    return next;
  }
  if (attempts.size() >= 2) {
    const Attempt& before = attempts[attempts.size() - 2];
    if (before.cause == last.cause && before.step_reached == last.step_reached) {
      next.why = fmt::format("the same failure ({}) at the same step ({}) twice in a row: not restarting again",
                             cause_name(last.cause), last.step_reached);
      return next;
    }
  }
  const int restarts_done = static_cast<int>(attempts.size()) - 1;
  if (restarts_done >= limits.restarts) {
    next.why = fmt::format("{} restart(s) inside the job spent (--restarts={})", restarts_done, limits.restarts);
    return next;
  }
  NodeChoice choice = choose_nodes(last.nodes, allocation, left_out, step_nodes, limits);
  next.why = std::move(choice.why);
  next.restart = !choice.nodes.empty();
  next.nodes = std::move(choice.nodes);
  return next;
}

NodeChoice choose_nodes(const std::vector<std::string>& previous, const std::vector<std::string>& allocation,
                        const std::set<std::string>& left_out, int step_nodes, const RestartLimits& limits) {
  NodeChoice choice;
  std::vector<std::string> nodes;
  for (const auto& n : previous)
    if (!left_out.count(n)) nodes.push_back(n);
  for (const auto& n : allocation) {
    if (static_cast<int>(nodes.size()) >= step_nodes) break;
    if (!left_out.count(n) && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  if (static_cast<int>(nodes.size()) > step_nodes) nodes.resize(static_cast<std::size_t>(step_nodes));
  if (static_cast<int>(nodes.size()) < step_nodes) {
    const std::string out = left_out.empty() ? "none" : fmt::format("{}", fmt::join(left_out, ","));
    if (!limits.allow_fewer || static_cast<int>(nodes.size()) < std::max(1, limits.min_nodes)) {
      choice.why = fmt::format(
          "no spare node left: a step needs {} node(s) and {} of the allocation's {} are healthy (left out: {}){}",
          step_nodes, nodes.size(), allocation.size(), out,
          limits.allow_fewer ? fmt::format(", fewer than --min-nodes={}", limits.min_nodes)
                             : "; --allow-fewer would go on with fewer");
      return choice;
    }
    choice.why = fmt::format("no spare node left (left out: {}): going on with {} of {} node(s) (--allow-fewer)", out,
                             nodes.size(), step_nodes);
  }
  choice.nodes = std::move(nodes);
  return choice;
}

std::set<std::string> nodes_left_out(const std::vector<Attempt>& attempts) {
  std::set<std::string> out;
  for (const auto& a : attempts) out.insert(a.left_out.begin(), a.left_out.end());
  return out;
}

std::string format_attempts(const std::vector<Attempt>& attempts) {
  std::string text;
  for (const auto& a : attempts) {
    const nlohmann::json j{{"attempt", a.number},
                           {"nodes", a.nodes},
                           {"started_unix", a.started_unix},
                           {"ended_unix", a.ended_unix},
                           {"first_step_unix", a.first_step_unix},
                           {"exit_code", a.exit_code},
                           {"cause", cause_name(a.cause)},
                           {"rank", a.rank},
                           {"node", a.node},
                           {"left_out", a.left_out},
                           {"started_from", a.started_from},
                           {"step_reached", a.step_reached},
                           {"steps_lost", a.steps_lost},
                           {"recovery_seconds", a.recovery_seconds},
                           {"message", a.message},
                           {"gpu_fault", a.gpu_fault}};
    text += j.dump() + "\n";
  }
  return text;
}

std::vector<Attempt> parse_attempts(const std::string& text) {
  std::vector<Attempt> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      Attempt a;
      a.number = j.at("attempt").get<int>();
      a.nodes = j.at("nodes").get<std::vector<std::string>>();
      a.started_unix = j.at("started_unix").get<double>();
      a.ended_unix = j.at("ended_unix").get<double>();
      a.first_step_unix = j.at("first_step_unix").get<double>();
      a.exit_code = j.at("exit_code").get<int>();
      a.cause = parse_cause(j.at("cause").get<std::string>());
      a.rank = j.at("rank").get<int>();
      a.node = j.at("node").get<std::string>();
      a.left_out = j.at("left_out").get<std::vector<std::string>>();
      a.started_from = j.at("started_from").get<std::uint64_t>();
      a.step_reached = j.at("step_reached").get<std::uint64_t>();
      a.steps_lost = j.at("steps_lost").get<std::int64_t>();
      a.recovery_seconds = j.at("recovery_seconds").get<double>();
      a.message = j.at("message").get<std::string>();
      if (j.contains("gpu_fault")) a.gpu_fault = j.at("gpu_fault").get<std::string>();
      out.push_back(std::move(a));
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format("line {}: {}", number, e.what()));
    }
  }
  return out;
}

}  // namespace slurm_train
